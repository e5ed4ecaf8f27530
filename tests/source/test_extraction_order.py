"""The order of the source's resources, derived from the tables' declarations
(`tables.extraction_order`, as dlt's `rest_api` derives its resources' with `graphlib`).

Declarations made up for each rule; the source's own order is checked against its declarations
in tests/source/test_declarations.py.
"""

from __future__ import annotations

from graphlib import CycleError
from typing import Any

import pytest
from esper_warehouse.sources.esper.table import Table
from esper_warehouse.sources.esper.tables import extraction_order


def declared(*tables: Table) -> dict[str, Table]:
    return {table.name: table for table in tables}


def table(name: str, **declaration: Any) -> Table:
    path = f"/v0/{name}/{{id}}/" if declaration.get("parent") else f"/v0/{name}/"
    return Table(name, path, ("id",), **declaration)


def test_a_table_comes_after_its_parent_its_needs_and_its_companion_declared_after_it() -> None:
    tables = declared(
        table("versions", parent="apps"),
        table("statuses", needs=("requests",)),
        table("history", loaded_with="items"),
        table("apps"),
        table("requests"),
        table("items"),
    )
    assert extraction_order(tables, ()) == [
        "apps", "versions", "requests", "statuses", "items", "history",
    ]  # fmt: skip


def test_tables_free_to_start_keep_their_declaration_order() -> None:
    tables = declared(table("c"), table("a"), table("b", parent="c"), table("d"))
    assert extraction_order(tables, ()) == ["c", "a", "b", "d"]


def test_the_devices_walk_comes_first_and_its_tables_need_no_after() -> None:
    tables = declared(
        table("heartbeats"),
        table("devices"),
        table("apps", needs=("devices",)),
        table("events", needs=("devices",), after=("statuses",)),
        table("statuses"),
    )
    walk = ("devices", "apps", "events")  # events read per device page: every feed
    assert extraction_order(tables, walk) == ["devices", "apps", "events", "heartbeats", "statuses"]


def test_a_table_following_one_of_the_tail_comes_after_the_whole_tail() -> None:
    tables = declared(
        table("devices"),
        table("events", needs=("devices",), after=("devices", "statuses")),
        table("statuses", parent="requests"),
        table("requests"),
        table("groups"),  # unrelated, declared after: still before events (it waits for it)
    )
    order = extraction_order(tables, ("devices",))
    assert order == ["devices", "requests", "statuses", "groups", "events"]


def test_a_table_following_the_walk_alone_waits_for_nothing_else() -> None:
    tables = declared(
        table("devices"),
        table("census", loaded_with="devices", after=("devices",)),
        table("groups"),
    )
    assert extraction_order(tables, ("devices",)) == ["devices", "census", "groups"]


def test_a_table_absent_from_the_run_is_not_waited_for() -> None:
    tables = declared(table("statuses", needs=("requests",)), table("groups"))
    assert extraction_order(tables, ()) == ["statuses", "groups"]


def test_declarations_following_each_other_round_a_circle_are_refused() -> None:
    tables = declared(table("a", after=("b",)), table("b", after=("a",)))
    with pytest.raises(CycleError):
        extraction_order(tables, ())
