"""pipelines/, sources/ and simulator/ import each other without a cycle (issue 20), and the
modules of sources/esper (issue 44) and of pipelines/ (issue 55) sit in layers that import only
downwards.

The graph is read from the files (ast), not by importing them: every `import` and `from ...
import` of an `esper_warehouse.*` module counts, at the top of a module, inside a function and
under `if __name__ == "__main__":` alike, so an import moved into a function or a script's block
cannot hide a cycle or an arrow running up. `from package import name` is an edge to the
submodule `package.name` when there is one, else to the package itself. Imports under `if
TYPE_CHECKING:` never run: the cycle check of the whole repository leaves them out (annotations
only: simulator/datatap/__init__.py names `state.World` so), but within sources/esper and
pipelines/ they count, for the layers and for each package's own cycle check: a type named from
a layer above ties the layers together as surely as a call does.

The layers of sources/esper, bottom first (`LAYERS`; why: docs/decisions.md, "Layers"): `http`
sends every request; `run` keeps one run's bookkeeping and sends none; `tables` and the devices
`scan` read the tenant through them; the source function (`esper`) on top. The modules they all
share sit between: `times` and `vocabulary` at the ground, `arrow`, `table` and `settings` (a
table's declaration and its Arrow pages) above `http`, `common` (what the resources share) above
`run`. A module imports its own layer or one below it; an import running back up fails the test.

The layers of pipelines/, bottom first (`PIPELINE_LAYERS`; docs/decisions.md, "Layers for
pipelines/"): the ground modules every layer shares (exit codes, how a value reads, the
warehouse file, the pipeline's own tables, the extras); `shapes` (an answer against the
recorded shapes); `build` (the SQL models); `run` (one run: load, then build); `views` (what a
warehouse shows, and doctor); `jobs` (many tenants, the demo, Dagster); `commands` (one module
per subcommand) and `cli`; `tools` on top (the developers' `python -m` commands: a generator of
the documents may read the command line). No exception list: a module in no layer fails too.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "esper_warehouse"
FOLDERS = ("pipelines", "sources", "simulator")


def modules() -> dict[str, Path]:
    """Every module of the folders, by its import name (`esper_warehouse.pipelines.cli`)."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([PACKAGE, *parts])] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, name: str, path: Path) -> list[str]:
    """The modules an import statement names, absolute (`from . import x` resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _imports(tree: ast.AST, typing: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions and script blocks too, except under `if
    TYPE_CHECKING:` (unless `typing`)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and not typing and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph(typing: bool = False, texts: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its file; `typing`: under `if
    TYPE_CHECKING:` too). `texts`: module -> source read in place of its file (a test's)."""
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        text = (texts or {}).get(name)
        tree = ast.parse(path.read_text() if text is None else text, str(path))
        for node in _imports(tree, typing):
            targets = _imported(node, name, path)
            if isinstance(node, ast.ImportFrom):
                submodules = [t for t in targets[1:] if t in known]
                # `from pkg import sub`: the submodule; `from pkg import name`: the package
                targets = (
                    submodules if len(submodules) == len(targets) - 1 else targets[:1] + submodules
                )
            graph[name] |= {t for t in targets if t in known and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (`a -> b -> a`), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_imports_inside_functions_not_under_type_checking() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.sources.esper" in graph[f"{PACKAGE}.pipelines.run.runner"]  # at the top
    # inside `SimApp._is_android`
    assert f"{PACKAGE}.simulator.catalog" in graph[f"{PACKAGE}.simulator.app"]
    # `if TYPE_CHECKING: from ...state import World`: annotations only
    assert f"{PACKAGE}.simulator.state" not in graph[f"{PACKAGE}.simulator.datatap"]


def test_the_graph_counts_a_script_block_and_leaves_out_type_checking() -> None:
    tree = ast.parse(
        "import a\nif __name__ == '__main__':\n    import b\nelse:\n    import c\n"
        "if TYPE_CHECKING:\n    import d\nelse:\n    import e\n"
    )
    assert sorted(alias.name for node in _imports(tree) for alias in node.names) == [
        "a", "b", "c", "e"
    ]  # fmt: skip
    assert sorted(a.name for node in _imports(tree, typing=True) for a in node.names) == [
        "a", "b", "c", "d", "e"
    ]  # fmt: skip


def test_a_module_is_named_by_its_path_from_the_repository_root() -> None:
    """`esper_warehouse.pipelines.views.status` is pipelines/views/status.py, as `modules()`
    reads it: in a checkout esper_warehouse/__init__.py puts the root on the package's search
    path, so the interpreter finds every module where a reader looks for it."""
    found = {name: importlib.util.find_spec(name) for name in modules()}
    assert {
        n: s.origin for n, s in found.items() if s is None or s.origin != str(modules()[n])
    } == {}


def test_find_cycle_reports_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


SOURCE = f"{PACKAGE}.sources.esper"
# The layers of sources/esper, bottom first, each with the top-level modules and packages in it
# ("": the package itself, the source function).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("times", "vocabulary")),  # how API times and vocabulary codes read
    ("http", ("http",)),  # every request: client, policy, pacing, pages, errors, origin
    ("declarations", ("arrow", "table", "settings")),  # `Table`, its Arrow pages; the settings
    ("run", ("run",)),  # one run's ledger, refusals and dlt state: no request, no table
    ("shared", ("common",)),  # what the resources share: options, refused routes and parts
    ("tables", ("tables",)),  # one module per table family: its declarations and resources
    ("scan", ("scan",)),  # the devices scan: the run's opening, scope, walk, its resources
    ("source", ("",)),  # `esper`: the table of contents
)


PIPELINES = f"{PACKAGE}.pipelines"
# The layers of pipelines/, bottom first, each with the top-level modules and packages in it
# ("": the package itself, which switches dlt's telemetry off before anything imports dlt).
PIPELINE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # what every layer shares: exit codes, how a value reads, the warehouse file and its lock,
    # the pipeline's own tables (`_esper_runs` ...), the optional parts of the install
    ("ground", ("", "exit_codes", "readable", "warehouse", "bookkeeping", "extras")),
    ("shapes", ("shapes",)),  # an Esper answer against the recorded shapes
    ("build", ("build",)),  # the SQL models, the raw tables they read, their tests, the change log
    ("run", ("run",)),  # one run: extract, load, reconcile, record, then the build
    ("views", ("views",)),  # what a warehouse shows (status, report, notify, publish), doctor
    ("jobs", ("jobs",)),  # runs, builds and views together: many tenants, the demo, Dagster
    ("commands", ("commands",)),  # one module per subcommand: its options, its body
    ("cli", ("cli",)),  # `esper-warehouse`: parse, run the subcommand, exit
    ("tools", ("tools",)),  # the developers' `python -m` commands: the docs' generators, a Postgres
)
LAYERED = {SOURCE: LAYERS, PIPELINES: PIPELINE_LAYERS}


def layer_of(module: str, package: str = SOURCE) -> int | None:
    """The layer (index in the package's layers) of a module of `package` (sources/esper or
    pipelines/); None: placed in none."""
    top = module.removeprefix(package).removeprefix(".").split(".")[0]
    return next((i for i, (_, names) in enumerate(LAYERED[package]) if top in names), None)


def package_graph(
    package: str, typing: bool = True, texts: dict[str, str] | None = None
) -> dict[str, set[str]]:
    """The import graph of one package alone, TYPE_CHECKING imports included by default."""
    graph = import_graph(typing, texts)
    inside = {name for name in graph if name == package or name.startswith(package + ".")}
    return {name: graph[name] & inside for name in sorted(inside)}


def source_graph(typing: bool = True, texts: dict[str, str] | None = None) -> dict[str, set[str]]:
    """The import graph of sources/esper alone, TYPE_CHECKING imports included by default."""
    return package_graph(SOURCE, typing, texts)


def _short(module: str, package: str) -> str:
    return module.removeprefix(package).removeprefix(".") or package.rsplit(".", 1)[-1]


def layer_violations(graph: dict[str, set[str]], package: str = SOURCE) -> list[str]:
    """Each import that runs back up a layer (`run.ledger -> tables.devices (run imports
    tables)`), or from or to a module placed in no layer."""
    layers, found = LAYERED[package], []
    for name, imported in sorted(graph.items()):
        for target in sorted(imported):
            low, high = layer_of(name, package), layer_of(target, package)
            where = f"{_short(name, package)} -> {_short(target, package)}"
            if low is None or high is None:
                found.append(f"{where} (no layer)")
            elif high > low:
                found.append(f"{where} ({layers[low][0]} imports {layers[high][0]})")
    return found


def test_every_module_of_the_source_has_a_layer() -> None:
    assert [name for name in source_graph() if layer_of(name) is None] == []


def test_the_source_imports_only_downwards_type_checking_included() -> None:
    """`http` <- `run` <- `tables` <- `scan` <- the source, with the shared modules between."""
    found = layer_violations(source_graph())
    assert found == [], "imports running back up a layer:\n" + "\n".join(found)


def test_no_import_cycle_in_the_source_type_checking_included() -> None:
    cycle = find_cycle(source_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_run_sends_no_request() -> None:
    """Of `http`, the run's modules name only the errors a refusal records."""
    reaching = {
        name: sorted(t for t in imported if layer_of(t) == 1 and t != f"{SOURCE}.http.errors")
        for name, imported in source_graph().items()
        if layer_of(name) == 3
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_a_type_checking_import_running_up_or_closing_a_cycle_is_reported() -> None:
    """The rule fails on an import under `if TYPE_CHECKING:` from `run/` to `tables/`, and on
    the circle such an import closes, though neither runs."""
    ledger, state = f"{SOURCE}.run.ledger", f"{SOURCE}.run.state"
    typed = "\nif TYPE_CHECKING:\n    from ..tables.devices import DEVICES\n"
    texts = {ledger: modules()[ledger].read_text() + typed}
    assert f"{SOURCE}.tables.devices" not in import_graph(texts=texts)[ledger]  # never runs
    assert layer_violations(source_graph(texts=texts)) == [
        "run.ledger -> tables.devices (run imports tables)"
    ]
    assert layer_violations({f"{SOURCE}.scan.walk": {f"{SOURCE}.table", f"{SOURCE}.x"}}) == [
        "scan.walk -> x (no layer)"
    ]
    typed = "\nif TYPE_CHECKING:\n    from ..scan.devices import devices\n"
    graph = source_graph(texts={state: modules()[state].read_text() + typed})
    above_http = {name: graph[name] for name in graph if layer_of(name) != 1}  # (http's own)
    cycle = find_cycle({name: imported & set(above_http) for name, imported in above_http.items()})
    assert cycle is not None and state in cycle and f"{SOURCE}.scan.devices" in cycle


def test_every_module_of_the_pipelines_has_a_layer() -> None:
    graph = package_graph(PIPELINES)
    assert [name for name in graph if layer_of(name, PIPELINES) is None] == []


def test_the_pipelines_import_only_downwards_type_checking_and_scripts_included() -> None:
    """ground <- shapes <- build <- run <- views <- jobs <- commands <- cli <- tools."""
    found = layer_violations(package_graph(PIPELINES), PIPELINES)
    assert found == [], "imports running back up a layer:\n" + "\n".join(found)


def test_no_import_cycle_in_the_pipelines_type_checking_included() -> None:
    cycle = find_cycle(package_graph(PIPELINES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_script_block_or_a_type_running_up_the_pipelines_is_reported() -> None:
    """A `__main__` block handing a library module over to its command, a type named under `if
    TYPE_CHECKING:` from a command, and a module placed in no layer each fail the rule; so does
    the circle such a block closes."""
    models, status = f"{PIPELINES}.build.models", f"{PIPELINES}.views.status"
    script = '\nif __name__ == "__main__":\n    from ..commands.models import main\n'
    typed = "\nif TYPE_CHECKING:\n    from ..commands import Subcommand\n"
    texts = {
        models: modules()[models].read_text() + script,
        status: modules()[status].read_text() + typed,
    }
    graph = package_graph(PIPELINES, texts=texts)
    assert layer_violations(graph, PIPELINES) == [
        "build.models -> commands.models (build imports commands)",
        "views.status -> commands (views imports commands)",
    ]
    assert f"{PIPELINES}.commands" not in import_graph(texts=texts)[status]  # never runs
    cycle = find_cycle(graph)
    assert cycle is not None and models in cycle and f"{PIPELINES}.commands.models" in cycle
    assert layer_violations({f"{PIPELINES}.views.x": {f"{PIPELINES}.fleet"}}, PIPELINES) == [
        "views.x -> fleet (no layer)"
    ]
