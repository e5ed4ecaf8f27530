"""A fact once (issue 44): a list read whole each run states its route and its key once by hand,
in its `Table` declaration.

Its resource is made from the declaration (`Table.whole_list`, `tables.LISTS`), the simulator
serves the route the declaration names (`Route("GET", GROUPS.path, ...)`), a test's fault glob
is made from it (`tests.routes.glob`), and the row-by-row comparison with the simulator's truth
reads the declared key (`tests.pipeline.helpers.compare`). Read from the files (ast): a string
constant equal to the route (as declared, or as a fault's glob), or a `{"<table>": (<key>, ...)}` entry,
written anywhere else in sources/, simulator/ or tests/, fails here, naming the file and line.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from esper_warehouse.sources.esper.tables import TABLES

from tests.routes import glob

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("sources", "simulator", "tests")
WHOLE_LISTS = sorted(name for name, table in TABLES.items() if table.whole_list is not None)


@cache
def _trees() -> dict[str, ast.AST]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def _constants(tree: ast.AST) -> list[tuple[str, int]]:
    """Every whole string constant (not the pieces of an f-string: another route, built on it)."""
    pieces = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in pieces
    ]


def test_there_are_whole_lists_to_check() -> None:
    assert {"groups", "geofences", "users", "pipelines"} <= set(WHOLE_LISTS)


def test_a_whole_lists_route_is_written_once_in_its_declaration() -> None:
    trees = _trees()
    again = {}
    for name in WHOLE_LISTS:
        table = TABLES[name]
        forms = {table.path, glob(table), glob(table) + "*"}  # `*`: the route and what follows
        written = [
            f"{file}:{line}"
            for file, tree in trees.items()
            for value, line in _constants(tree)
            if value in forms
        ]
        if len(written) != 1 or not written[0].startswith("sources/esper/tables/"):
            again[f"{name} ({table.path})"] = written
    assert not again, f"a whole list's route written again (read it from its Table): {again}"


def _key_entries(tree: ast.AST) -> list[tuple[str, tuple, int]]:
    """`{"<name>": (<tuple of strings>, ...)}` entries: a table's key written beside its name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(value, ast.Tuple)):
                continue
            for element in value.elts:
                try:
                    literal = ast.literal_eval(element)
                except ValueError:
                    continue
                if isinstance(literal, tuple):
                    found.append((key.value, literal, node.lineno))
    return found


def test_no_table_key_is_written_again_beside_its_name() -> None:
    restated = [
        f"{file}:{line} {name}: {key}"
        for file, tree in _trees().items()
        for name, key, line in _key_entries(tree)
        if name in TABLES and key == TABLES[name].key
    ]
    assert not restated, restated
