"""Issue 42, "a parent is the one we asked", for the child routes beyond Pipelines: role scopes,
a user's legacy detail and group access, an operation's devices, a blueprint's versions and a
device's event feed.

Each child row carries the parent its request named. An item that repeats another parent's id
leaves its part out, named with the route (exit 6), never filed under either parent; an item
that repeats none belongs to the parent asked. The simulator's drift fault serves both shapes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.sources.esper.tables import TABLES

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import compare, load


def _route(table: str, parent: object) -> str:
    return TABLES[table].path.format(eid="*", id=parent)


def _drift(route: str, field: str, value: Any) -> dict[str, Any]:
    return {"kind": "drift", "variant": "value", "route": route, "field": field, "value": value}


def _rename(route: str, field: str) -> dict[str, Any]:
    return {"kind": "drift", "variant": "rename", "route": route, "field": field, "to": "gone"}


def _count(wh: Path, table: str, column: str, value: object) -> int:
    with duckdb.connect(str(wh), read_only=True) as con:
        sql = f"select count(*) from esper.{table} where {column} = ?"
        return con.execute(sql, [str(value)]).fetchone()[0]  # type: ignore[index]


def _two_parents(sim, table: str, column: str) -> tuple[str, str, int]:
    """Two parents with children in the truth, and how many the second holds."""
    counts: dict[str, int] = {}
    for record in sim.truth(table):
        counts[str(record[column])] = counts.get(str(record[column]), 0) + 1
    asked, other = sorted(counts, key=lambda p: (-counts[p], p))[:2]
    return asked, other, counts[other]


def _as_served(_sim, parent: str) -> str:
    return parent


def _feed_link(sim, device: str) -> str:
    return f"{sim.base_url}/enterprise/{ENTERPRISE_ID}/device/{device}/"


# table, the column holding the parent, the field that names it in the served item, its value
# for the other parent, and the words the run names the left-out part with
MERGED = [
    ("operation_devices", "operation_id", "operation_id", _as_served,
     "GET /v0/operations/{id}/devices/ served items whose operation_id names another operation"),
    ("blueprint_versions", "id", "id", _as_served,
     "GET /v2/blueprints/{id}/versions/ served items whose id names another blueprint"),
    ("device_events", "device_id", "device", _feed_link,
     "GET /enterprise/{eid}/device/{id}/download/eventfeed/ answered 200 "
     "(its events name another device than the one asked)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "column", "field", "value", "named"), MERGED, ids=[m[0] for m in MERGED]
)
def test_a_child_naming_another_parent_is_left_out_then_asked_again(
    sim, tmp_path: Path, table: str, column: str, field: str, value: Any, named: str
) -> None:
    """One parent's list names the other parent: on a first load its children are left out
    (not filed under the other, which keeps exactly its own), the run is partial and says so;
    the next run, served right, reads the part again and the table equals the API's."""
    wh = tmp_path / "warehouse.duckdb"
    asked, other, others = _two_parents(sim, table, column)
    served = value(sim, other)
    sim.set_faults([_drift(_route(table, asked), field, served)])
    result = load(sim, wh, resources=[table])
    assert result.exit_code == Exit.PARTIAL, result.error
    assert named in result.unavailable[table], result.unavailable
    assert _count(wh, table, column, asked) == 0
    assert _count(wh, table, column, other) == others

    sim.set_faults([])
    again = load(sim, wh, resources=[table])
    assert again.exit_code == 0, (again.error, again.unavailable)
    compare(sim, wh, table)


@pytest.mark.parametrize(
    ("table", "column", "field"),
    [("operation_devices", "operation_id", "operation_id"), ("blueprint_versions", "id", "id"),
     ("device_events", "device_id", "device"), ("user_profiles", "id", "id")],
    ids=["operation-devices", "blueprint-versions", "device-events", "user-profiles"],
)  # fmt: skip
def test_a_child_without_its_parents_id_belongs_to_the_parent_asked(
    sim, tmp_path: Path, table: str, column: str, field: str
) -> None:
    """Every item of the route served without the id it repeats of its parent: the rows carry
    the parent asked and the table equals the API's, exit 0."""
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([_rename(_route(table, "*"), field)])
    result = load(sim, wh, resources=[table])
    assert result.exit_code == 0, (result.error, result.unavailable)
    if table == "user_profiles":
        assert _profiles(wh) == _profile_truth(sim)
        return
    compare(sim, wh, table)
    key = TABLES[table].key
    with duckdb.connect(str(wh), read_only=True) as con:
        sql = f"select {', '.join(key)}, {column} from esper.{table}"
        stored = {tuple(map(str, row)) for row in con.execute(sql).fetchall()}
    assert stored == {tuple(str(r[c]) for c in (*key, column)) for r in sim.truth(table)}


def _profiles(wh: Path) -> set[tuple[str, str]]:
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute("select id, user_id from esper.user_profiles").fetchall()
    return {(str(i), str(u)) for i, u in rows}


def _profile_truth(sim) -> set[tuple[str, str]]:
    return {(str(p["id"]), p["profile"]["authn_user_id"]) for p in sim.truth("user_profiles")}


def _access(sim, table: str) -> set[tuple[str, str]]:
    if table == "user_profiles":
        return _profile_truth(sim)
    parent, child = {"role_scopes": ("role_id", "id"), "user_groups": ("user_id", "user_id")}[table]
    return {(str(r[parent]), str(r[child])) for r in sim.truth(table)}


def _access_rows(wh: Path, table: str) -> set[tuple[str, str]]:
    if table == "user_profiles":
        return _profiles(wh)
    parent, child = {"role_scopes": ("role_id", "id"), "user_groups": ("user_id", "user_id")}[table]
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(f"select {parent}, {child} from esper.{table}").fetchall()
    return {(str(p), str(c)) for p, c in rows}


def _parents(sim, table: str, field: str) -> tuple[str, object]:
    """(the id the route names, another parent's id as the item would repeat it)."""
    if table == "role_scopes":
        roles = sorted({r["role_id"] for r in sim.truth("role_scopes")})
        return roles[0], roles[1]
    first, second = sorted(sim.truth("user_profiles"), key=lambda p: p["id"])[:2]
    if table == "user_groups":
        return first["profile"]["authn_user_id"], second["profile"]["authn_user_id"]
    if field == "id":  # the legacy detail's own id: another user's legacy id
        return str(first["id"]), second["id"]
    return str(first["id"]), second["profile"]["authn_user_id"]


ACCESS = [
    ("role_scopes", "role_id", "role_id names another role"),
    ("user_groups", "user_id", "user_id names another user"),
    ("user_profiles", "profile.authn_user_id", "user_id names another user"),
    ("user_profiles", "id", "id names another user"),
]


@pytest.mark.parametrize(
    ("table", "field", "named"),
    ACCESS,
    ids=["role-scopes", "user-groups", "profile-authn-user", "profile-legacy-id"],
)
def test_a_replaced_child_naming_another_parent_keeps_the_table(
    sim, tmp_path: Path, first_load, table: str, field: str, named: str
) -> None:
    """Loaded right once (the shared first load), then one parent's answer names another parent:
    the replaced table is kept as loaded (no row moves to the other parent), and the run names
    the route and field."""
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)
    assert first.exit_code == 0, (first.error, first.unavailable)
    assert _access_rows(wh, table) == _access(sim, table)

    route_id, other = _parents(sim, table, field)
    sim.set_faults([_drift(_route(table, route_id), field, other)])
    result = load(sim, wh, resources=[table])
    assert result.exit_code == Exit.PARTIAL, result.error
    why = result.unavailable[table]
    assert f"left out: GET {TABLES[table].path} served items whose {named}" in why, why
    assert _access_rows(wh, table) == _access(sim, table)


def test_a_key_echoed_as_another_parent_is_redacted_in_the_message(sim, tmp_path: Path) -> None:
    """A server echoing the request's `Authorization` header into the parent field: the message
    quoting the other parent's id takes the key out before it is cut (a key cut first no longer
    matches the redaction), in the run's record and in its log."""
    roles = sorted({r["role_id"] for r in sim.truth("role_scopes")})
    echoed = f"Bearer {'x' * 20}{API_KEY}"  # the key straddles the 40th character
    sim.set_faults([_drift(_route("role_scopes", roles[0]), "role_id", echoed)])
    result = load(sim, tmp_path / "warehouse.duckdb", resources=["role_scopes"])
    why = result.unavailable["role_scopes"]
    assert "[redacted]" in why, why
    assert not any(API_KEY[i : i + 8] in why for i in range(len(API_KEY) - 7)), why
