"""Comments, docstrings and the how-to documents name only what exists.

A comment that points at a moved module sends the next reader to a file that is not there. Three
kinds of name are checked wherever prose is written (the comments and docstrings of every Python
file in git, and the README, every page under docs/ (`tests.docs.pages`: the guide, the
reference, the recipes, ...) and the other READMEs; `docs/decisions.md` is history and may name
what is gone):

- a file path (`scan/walk.py`, `sql/marts/fleet_compliance.sql`, `README.md`): some file or
  folder in git ends with it (a file of another repository is written `owner/repo:path`);
- an attribute of a capitalised owner (`Table.hints`; constants such as `DEVICES` are not
  owners): the owner is a class of the repository that has the attribute (itself or a base
  defined here), or a schema of the OpenAPI subsets in docs/spec/;
- `module.name` for a module of the repository, in a comment or docstring: the module defines it;
- in sources/esper, `module.Name` where `Name` is defined by some module of the repository
  (`weekly.FanOutScope`, `reads.read_all`): `module` is a module, of the repository or
  importable (a variable's attribute, `plan.walk`, names nothing defined at the top of a module).

Names that are not the repository's own (dlt's, DuckDB's, SQL tables that share a module's name)
are not judged.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import subprocess
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (
    "README.md",
    "docs/contracts.md",
    "docs/spec/README.md",
    "bench/README.md",
    "sql/seeds/README.md",
    "tests/simulator/README.md",
)

PATH = re.compile(r"(?<![\w/.:~-])((?:[A-Za-z_][\w-]*/)*[A-Za-z_][\w-]*\.(?:py|sql|md))(?![\w.(])")
DOTTED = re.compile(r"`([A-Za-z_]\w*)\.([A-Za-z_]\w*)")
QUALIFIED = re.compile(r"`([a-z_]\w*)\.([A-Za-z_]\w*)")  # `module.Name`, `module.function`
# `x.md(...)`-like attribute calls read as file names (marimo's `mo.md`, a connection's `.sql`).
NOT_FILES = {"mo.md", "con.sql"}
# Module names that are also SQL schemas or tables, dlt objects or settings sections: `esper.x`,
# `devices.last_seen`, `pipeline.load`, `[esper_warehouse] x` are not references to the module.
SHARED_NAMES = {"esper", "devices", "groups", "pipeline", "source", "esper_warehouse", "table"}
FILE_SUFFIXES = {"py", "sql", "md", "json", "toml", "duckdb", "csv", "example", "lock", "txt"}


@cache
def _git_files() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return tuple(out.stdout.split())


@cache
def _paths() -> frozenset[str]:
    files = _git_files()
    return frozenset(files) | {str(Path(f).parent) for f in files}


def _python_files() -> list[str]:
    return [f for f in _git_files() if f.endswith(".py") and (ROOT / f).exists()]


def _path_exists(token: str) -> bool:
    return any(p == token or p.endswith("/" + token) for p in _paths())


@cache
def _schemas() -> frozenset[str]:
    """The schema names of the OpenAPI subsets (`DeviceGroup.parent` names a field of one)."""
    names: set[str] = set()
    for spec in sorted((ROOT / "docs" / "spec").glob("*subset*.json")):
        names |= set(json.loads(spec.read_text()).get("components", {}).get("schemas", {}))
    return frozenset(names)


@cache
def _definitions() -> tuple[dict[str, set[str]], dict[str, tuple[set[str], set[str]]]]:
    """Top-level names per module stem, and (attributes, base names) per class name."""
    modules: dict[str, set[str]] = {}
    classes: dict[str, tuple[set[str], set[str]]] = {}
    for f in _python_files():
        tree = ast.parse((ROOT / f).read_text())
        path = Path(f)
        stem = path.parent.name if path.stem == "__init__" else path.stem
        modules.setdefault(stem, set()).update(_top_names(tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                attrs, bases = classes.setdefault(node.name, (set(), set()))
                attrs.update(_class_names(node))
                bases.update(
                    b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases
                )
    return modules, classes


def _top_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _class_names(node: ast.ClassDef) -> set[str]:
    names = _top_names(ast.Module(body=node.body, type_ignores=[]))
    for sub in ast.walk(node):  # self.x = ... in its methods
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Store)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "self"
        ):
            names.add(sub.attr)
    return names


def _class_attributes(name: str, seen: frozenset[str] = frozenset()) -> set[str] | None:
    """The attributes of the repository's class `name`; None when a base is not ours."""
    classes = _definitions()[1]
    attrs, bases = classes[name]
    out = set(attrs)
    for base in bases - {"object"} - seen:
        if base not in classes:
            return None
        inherited = _class_attributes(base, seen | {name})
        if inherited is None:
            return None
        out |= inherited
    return out


def _prose(f: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, is Python) of the file's comments and docstrings, or its lines."""
    text = (ROOT / f).read_text()
    if not f.endswith(".py"):
        for n, line in enumerate(text.splitlines(), 1):
            yield n, line, False
        return
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string, True
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                for k, line in enumerate(doc.splitlines()):
                    yield node.body[0].lineno + k, line, True


def _dangling(line: str, python: bool) -> Iterator[str]:
    modules, classes = _definitions()
    for m in PATH.finditer(line):
        token = m.group(1)
        outside = line[: m.start()].endswith("../")  # beside the repository (../shared)
        if token not in NOT_FILES and not outside and not _path_exists(token):
            yield token
    for m in DOTTED.finditer(line):
        owner, name = m.groups()
        if owner in classes:
            attrs = _class_attributes(owner)
            if attrs is not None and name not in attrs:
                yield f"{owner}.{name}"
        elif (
            owner[:1].isupper()
            and not owner.isupper()
            and name not in FILE_SUFFIXES
            and owner not in _schemas()
        ):
            yield f"{owner}.{name}"  # a class that is not (or no longer) ours
        elif python and owner in modules and owner not in SHARED_NAMES:
            if name in FILE_SUFFIXES or name in modules[owner] or name in modules:
                continue
            inner = set().union(*(classes[c][0] for c in modules[owner] if c in classes))
            if name not in inner:
                yield f"{owner}.{name}"


def test_comments_docstrings_and_documents_name_only_what_exists() -> None:
    from tests.docs import pages

    pages_in_git = [f for f in pages() if f in _git_files()]
    scanned = [*_python_files(), *dict.fromkeys([*DOCUMENTS, *pages_in_git])]
    dangling = [
        f"{f}:{n}: {token}"
        for f in scanned
        for n, line, python in _prose(f)
        for token in _dangling(line, python)
    ]
    assert dangling == [], "names of nothing that exists:\n" + "\n".join(dangling)


def test_the_check_finds_a_moved_module_a_lost_attribute_and_a_missing_function() -> None:
    assert list(_dangling("see `sources/esper/weekly.py`", True)) == ["sources/esper/weekly.py"]
    assert list(_dangling("see sources/esper/scan/walk.py", True)) == []
    assert list(_dangling("`Table.endpoint` says", True)) == ["Table.endpoint"]
    assert list(_dangling("`Table.hints` says", True)) == []
    assert list(_dangling("`Endpoint.loaded_with` says", True)) == ["Endpoint.loaded_with"]
    assert list(_dangling("`DeviceGroup.parent` (a schema)", True)) == []
    assert list(_dangling("`models.create_raw_tables` makes", True)) == ["models.create_raw_tables"]
    assert list(_dangling("`raw_contract.raw_tables` makes", True)) == []


@cache
def _module_names() -> tuple[frozenset[str], frozenset[str]]:
    """The names a module goes by (its file's or package's stem, an import's alias; the SQL
    schemas too, the folders of sql/: `seeds.work_states` is a table), and the names defined at
    the top of any module (functions, classes, assignments: not imports)."""
    stems = {path.name for path in (ROOT / "sql").iterdir() if path.is_dir()}
    defined: set[str] = set()
    for f in _python_files():
        path = Path(f)
        stems.add(path.parent.name if path.stem == "__init__" else path.stem)
        tree = ast.parse((ROOT / f).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                stems.update(a.asname for a in node.names if a.asname)
        defined |= {
            name
            for name in _top_names(tree)
            if not any(
                isinstance(node, ast.Import | ast.ImportFrom)
                and name in {(a.asname or a.name).split(".")[0] for a in node.names}
                for node in tree.body
            )
        }
    return frozenset(stems), frozenset(defined)


def _not_modules(line: str) -> Iterator[str]:
    """`module.Name` references whose module is no module (`weekly.FanOutScope`)."""
    stems, defined = _module_names()
    for m in QUALIFIED.finditer(line):
        module, name = m.groups()
        if name not in defined or module in stems:
            continue
        try:
            importable = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            importable = False
        if not importable:
            yield f"{module}.{name}"


def test_a_module_named_in_the_source_exists() -> None:
    found = [
        f"{f}:{n}: {token}"
        for f in _python_files()
        if f.startswith("sources/esper/")
        for n, line, _ in _prose(f)
        for token in _not_modules(line)
    ]
    assert found == [], "names of modules that do not exist:\n" + "\n".join(found)


def test_the_module_check_finds_a_module_that_does_not_exist() -> None:
    assert list(_not_modules("the scan's `weekly.FanOutScope` decides")) == ["weekly.FanOutScope"]
    assert list(_not_modules("`reads.read_all` reads")) == ["reads.read_all"]
    assert list(_not_modules("`scope.FanOutScope` and `pages.read_all` and `httpx.Client`")) == []
    assert list(_not_modules("the run's `plan.full_scan`, `item.get`, `pa.Table`")) == []
