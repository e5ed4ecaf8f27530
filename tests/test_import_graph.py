"""pipelines/, sources/ and simulator/ import each other without a cycle (issue 20).

The graph is read from the files (ast), not by importing them: every `import` and `from ...
import` of an `esper_warehouse.*` module counts, at the top of a module and inside a function
alike, so an import moved into a function cannot hide a cycle. `from package import name` is an
edge to the submodule `package.name` when there is one, else to the package itself. Imports under
`if TYPE_CHECKING:` never run and are left out (annotations only: simulator/datatap/__init__.py names
`state.World` so), and so are those under `if __name__ == "__main__":`: they run only in the
module started as a script (`python -m esper_warehouse.pipelines.models`), which is `__main__`,
not the module its import finds, so they cannot close a cycle (`models.py` hands over to
`commands/models.py` so, which imports `models`).

The subcommands (pipelines/commands/) call into the library; the library never imports a
subcommand's module (it may read the shared options' defaults from the package).
"""

from __future__ import annotations

import ast
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


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions too, except under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and (
            "TYPE_CHECKING" in ast.unparse(node.test) or _runs_as_script(node.test)
        ):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _runs_as_script(test: ast.expr) -> bool:
    """`__name__ == "__main__"`."""
    return ast.unparse(test).replace("'", '"') == '__name__ == "__main__"'


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its file)."""
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
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


def test_the_graph_leaves_out_what_runs_only_as_a_script() -> None:
    tree = ast.parse(
        "import a\nif __name__ == '__main__':\n    import b\nelse:\n    import c\n"
        "if TYPE_CHECKING:\n    import d\nif name == '__main__':\n    import e\n"
    )
    assert sorted(alias.name for node in _imports(tree) for alias in node.names) == ["a", "c", "e"]
    graph = import_graph()  # `models.py`'s `__main__` block imports its command
    assert f"{PACKAGE}.pipelines.commands.models" not in graph[f"{PACKAGE}.pipelines.models"]
    assert f"{PACKAGE}.pipelines.models" in graph[f"{PACKAGE}.pipelines.commands.models"]


def test_find_cycle_reports_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_imports_the_command_line() -> None:
    """`cli` collects the subcommands; what it collects never reaches back for it."""
    cli = f"{PACKAGE}.pipelines.cli"
    assert sorted(name for name, imported in import_graph().items() if cli in imported) == []


def test_no_library_module_imports_a_subcommand() -> None:
    """A subcommand's module (its options, its body) is the last stop before `cli`: the library
    it calls never reaches back for it."""
    commands = f"{PACKAGE}.pipelines.commands."
    callers = {
        name: sorted(m for m in imported if m.startswith(commands))
        for name, imported in import_graph().items()
        if not name.startswith(commands) and name != f"{PACKAGE}.pipelines.cli"
    }
    assert {name: found for name, found in callers.items() if found} == {}
