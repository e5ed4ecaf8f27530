"""Issue 42: a key is a key, a parent is the one we asked, every record error names its table.

A record served without its table's key or cursor (absent, renamed or null) is set aside (issue
51): the run is partial (exit 6) naming `table.column` and the route, and the record is never
keyed `(None,)`, merged away, counted as a repeat or loaded as NULL. A child of a per-parent route carries the parent its request named;
an item that names another parent refuses its part (named, exit 6). The simulator's own drift
fault serves the broken shapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.sources.esper.tables import TABLES, read_from
from esper_warehouse.sources.esper.tables.catalogues import GROUPS
from esper_warehouse.sources.esper.tables.devices import V2_DEVICE_APPS_PATH
from esper_warehouse.sources.esper.tables.pipelines import TABLES as PIPELINE_TABLES

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET
from tests.pipeline.helpers import load
from tests.routes import glob
from tests.source.test_pipelines import _assert_equal_to_truth

GROUPS = glob(GROUPS)
TARGET_RUNS = "/pipelines/v0/stageruns/*/targetruns/"
STAGE_RUNS = "/pipelines/v0/runs/*/stageruns/"
STAGES = "/pipelines/v0/pipelines/*/stages/"
V2_APPS = V2_DEVICE_APPS_PATH.format(id="*")
# The Pipelines family's tables: what the tests of a Pipelines route load and assert; the other
# families' resources read none of its routes, so running them would only cost time.
PIPELINES = [t.name for t in PIPELINE_TABLES]


def _rename(route: str, field: str = "id", to: str = "uid", **more: Any) -> dict[str, Any]:
    return {"kind": "drift", "variant": "rename", "route": route, "field": field, "to": to, **more}


def _null(route: str, field: str, ids: list[str]) -> dict[str, Any]:
    return {"kind": "drift", "variant": "value", "route": route, "field": field, "value": None,
            "ids": ids}  # fmt: skip


def _rows(wh: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql).fetchall()


def _count(wh: Path, table: str, where: str = "true") -> int:
    return _rows(wh, f"select count(*) from esper.{table} where {where}")[0][0]


def _set_aside_naming(result: Any, column: str) -> str:
    """The run is partial, naming `column` set aside; what it says of the column's table."""
    assert result.exit_code == Exit.PARTIAL, result.error
    why = result.unavailable[column.split(".")[0]]
    assert f"set aside: {column} missing or null in GET" in why, result.unavailable
    return why


# ------------------------------------------------------------------------------- a key is a key


@pytest.mark.parametrize(
    ("route", "resources", "column", "served"),
    [
        (
            GROUPS,
            ["groups"],
            "groups.id",
            "9 record(s) set aside: groups.id missing or null in "
            "GET /enterprise/{eid}/devicegroup/",
        ),
        (TARGET_RUNS, ["pipeline_target_runs"], "pipeline_target_runs.id", "record(s) set aside"),
        (V2_APPS, ["device_apps"], "device_apps.id", "record(s) set aside"),
    ],
    ids=["groups", "target-runs", "apple-windows-apps"],
)
def test_a_renamed_key_is_set_aside_on_a_first_load_naming_it(
    sim, tmp_path: Path, route: str, resources: list[str], column: str, served: str
) -> None:
    """The simulator's drift renames `id` to `uid`: not one NULL row, not "served more than once
    (None)", not a count lowered to match and exit 0, but exit 6 naming the column."""
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([_rename(route)])
    result = load(sim, wh, resources=resources)
    assert served in _set_aside_naming(result, column)
    table = column.split(".")[0]
    assert _count(wh, table, "id is null") == 0


def test_a_renamed_key_on_a_nightly_keeps_what_was_loaded(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    groups = _count(wh, "groups")
    asserted = ["groups", "pipeline_target_runs"]  # the nightlies load the tables asserted
    sim.set_faults([_rename(GROUPS)])
    sim.advance(hours=24)
    _set_aside_naming(load(sim, wh, resources=asserted), "groups.id")  # target runs load
    target_runs = _count(wh, "pipeline_target_runs")
    sim.set_faults([_rename(TARGET_RUNS)])
    _set_aside_naming(load(sim, wh, resources=["pipeline_target_runs"]), "pipeline_target_runs.id")
    assert _count(wh, "groups") == groups and _count(wh, "groups", "id is null") == 0
    assert _count(wh, "pipeline_target_runs") == target_runs
    sim.set_faults([])  # the API serves its keys again: the night loads
    assert load(sim, wh, resources=asserted).exit_code == 0


def test_only_some_items_without_a_key_are_set_aside_too(sim, tmp_path: Path) -> None:
    """4 of 9 groups served with `id: null` (5 of 9 and "ok" before)."""
    wh = tmp_path / "warehouse.duckdb"
    groups = [g["id"] for g in sim.truth("groups")]
    sim.set_faults([_null(GROUPS, "id", groups[:4])])
    result = load(sim, wh, resources=["groups"])
    assert "4 record(s) set aside" in _set_aside_naming(result, "groups.id")


def test_a_null_cursor_is_set_aside_not_loaded_first_load_and_nightly(
    sim, tmp_path: Path, first_load
) -> None:
    """`devices.updated_at` null on some devices: never loaded as NULL, never a NULL-key row
    of `device_history` (which grew by one such row per device each night)."""
    some = [d["id"] for d in sim.truth("devices")][::50]
    sim.set_faults([_null("/v2/devices/", "updated_at", some)])
    (tmp_path / "first").mkdir()  # a run never creates its warehouse's folder
    result = load(sim, tmp_path / "first" / "warehouse.duckdb", resources=["devices"])
    assert f"{len(some)} record(s)" in _set_aside_naming(result, "devices.updated_at")

    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([])
    assert first_load(wh).exit_code == 0
    listed = ", ".join(f"'{d}'" for d in some)
    history = _count(wh, "device_history", f"id in ({listed})")
    sim.set_faults([_null("/v2/devices/", "updated_at", some)])
    for _night in range(2):
        sim.advance(hours=24)
        _set_aside_naming(load(sim, wh, resources=["devices"]), "devices.updated_at")
    assert _count(wh, "device_history", f"id in ({listed})") == history  # the others load
    assert _count(wh, "device_history", "updated_at is null") == 0
    assert _count(wh, "devices", "updated_at is null") == 0


# ----------------------------------------------------------------- a parent is the one we asked


@pytest.mark.parametrize(
    ("route", "field"),
    [(STAGES, "pipeline_id"), (STAGE_RUNS, "pipeline_run_id"), (TARGET_RUNS, "stage_run_id")],
    ids=["stages", "stage-runs", "target-runs"],
)
def test_children_without_their_parents_id_belong_to_the_parent_asked(
    sim, tmp_path: Path, first_load, route: str, field: str
) -> None:
    """The spec does not require the child to repeat its parent's id: stages without
    `pipeline_id`, stage runs without `pipeline_run_id`, target runs without `stage_run_id`
    are each the child of the parent whose route served them, first load and nightly. The runs
    load the Pipelines tables, the ones compared with the truth."""
    sim.set_faults([_rename(route, field, "gone")])
    (tmp_path / "first").mkdir()  # a run never creates its warehouse's folder
    first = load(sim, tmp_path / "first" / "warehouse.duckdb", resources=PIPELINES)
    assert first.exit_code == 0, first.error
    _assert_equal_to_truth(sim, tmp_path / "first" / "warehouse.duckdb")

    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([])
    assert first_load(wh).exit_code == 0
    sim.set_faults([_rename(route, field, "gone")])
    sim.advance(hours=24)
    nightly = load(sim, wh, resources=PIPELINES)
    assert nightly.exit_code == 0, nightly.error
    _assert_equal_to_truth(sim, wh)


def test_a_child_naming_another_parent_is_refused_and_named(sim, tmp_path: Path) -> None:
    """Stage runs of one run that name another run: that run's stage runs are left out (not
    filed under the other run), named with the route, and the run is partial."""
    wh = tmp_path / "warehouse.duckdb"
    runs = [r["id"] for r in sim.truth("pipeline_runs")]
    stage_runs = [s for s in sim.truth("pipeline_stage_runs") if s["pipeline_run_id"] == runs[0]]
    assert stage_runs and len(runs) > 1
    sim.set_faults([{"kind": "drift", "variant": "value", "route": f"/pipelines/v0/runs/{runs[0]}/stageruns/",
                     "field": "pipeline_run_id", "value": runs[1]}])  # fmt: skip
    result = load(sim, wh, resources=["pipeline_stage_runs"])
    assert result.exit_code == Exit.PARTIAL, result.error
    why = result.unavailable["pipeline_stage_runs"]
    assert "1 pipeline run(s) left out: GET /pipelines/v0/runs/{id}/stageruns/" in why
    assert "pipeline_run_id names another pipeline run" in why
    assert _count(wh, "pipeline_stage_runs", f"pipeline_run_id = '{runs[0]}'") == 0
    assert _count(wh, "pipeline_stage_runs", f"pipeline_run_id = '{runs[1]}'") == len(
        [s for s in sim.truth("pipeline_stage_runs") if s["pipeline_run_id"] == runs[1]]
    )


# --------------------------------------------------------------- refused parts, per child table


@pytest.mark.parametrize(
    ("route", "table", "named"),
    [
        (STAGE_RUNS, "pipeline_stage_runs", "GET /pipelines/v0/runs/{id}/stageruns/ answered 403"),
        (
            TARGET_RUNS,
            "pipeline_target_runs",
            "GET /pipelines/v0/stageruns/{id}/targetruns/ answered 403",
        ),
        (
            "/pipelines/v0/operationlists/*/operations/",
            "pipeline_stage_operations",
            "GET /pipelines/v0/operationlists/{id}/operations/ answered 403",
        ),
    ],
    ids=["stage-runs", "target-runs", "plan-operations"],
)
def test_a_refused_child_route_is_named_for_its_own_table(
    sim, tmp_path: Path, route: str, table: str, named: str
) -> None:
    """A 403 on one child route names that table, its route and status, and no other table
    (all three child tables said "pipeline_stage_runs: 32 parts refused" before). The run loads
    every Pipelines table, so each could be named."""
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([{"kind": "status", "status": 403, "route": route}])
    result = load(sim, wh, resources=PIPELINES)
    assert result.exit_code == Exit.PARTIAL, result.error
    assert set(result.unavailable) == {table}, result.unavailable
    assert named in result.unavailable[table]


@pytest.mark.parametrize(
    ("status", "exit_code", "named"),
    [(500, Exit.API, "/pipelines/v0/operationlists/"), (401, Exit.CONFIG, "HTTP 401")],
)
def test_a_5xx_or_401_on_a_stage_plan_is_not_a_refused_part(
    sim, tmp_path: Path, status: int, exit_code: Exit, named: str
) -> None:
    """A 500 after retries (or a 401) on a stage plan's list is the run's failure, as on any
    other route, not a part counted as refused with exit 6."""
    sim.set_faults(
        [{"kind": "status", "status": status, "route": "/pipelines/v0/operationlists/*"}]
    )
    result = load(sim, tmp_path / "warehouse.duckdb", resources=["pipeline_stage_operations"])
    assert result.exit_code == exit_code, result.error
    assert named in result.error


# -------------------------------------------------------- every record error names its table

# Key columns the loader fills from the request, never read from an item (checked below).
FILLED = {
    ("device_apps", "device_id"),
    ("status_metrics", "snapshot_date"),
    ("user_groups", "user_id"),
    ("user_profiles", "id"),  # the legacy id the route names
    ("role_scopes", "role_id"),
    ("pipeline_stage_targets", "stage_id"),
    ("pipeline_stage_targets", "target_list_id"),
}


def _cases() -> list[tuple[str, str, str]]:
    """(table selected, route table, field): each table's key and cursor as served, and the
    key of each table it is read from (its parent's key, which its requests name)."""
    cases: set[tuple[str, str, str]] = set()
    for table in TABLES.values():
        for field in table.identifying:
            if (table.name, field) not in FILLED:
                cases.add((table.name, table.name, field))
        for parent in read_from(table):
            cases.update((table.name, parent, field) for field in TABLES[parent].key)
    return sorted(cases)


def _glob(path: str) -> str:
    return path.format(eid="*", id="*")


@pytest.fixture(scope="module")
def one_sim() -> Iterator[Any]:
    """One simulator for every case below, built as `sim` builds it: each case sets its own
    fault and never moves the clock, and serving requests changes nothing of its world."""
    from esper_warehouse.simulator import Simulator

    with Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as server:
        yield server


@pytest.mark.parametrize(("selected", "route_table", "field"), _cases())
def test_every_table_sets_aside_a_missing_key_cursor_or_parent_key(
    one_sim, tmp_path: Path, selected: str, route_table: str, field: str
) -> None:
    """Each declared table's items served without each field it cannot load without: the items
    are set aside, the run is partial (exit 6) naming `table.column` missing of the tables
    involved, never a bare KeyError, a reconciliation shortfall or a NULL key loaded."""
    table = TABLES[route_table]
    one_sim.set_faults([_rename(_glob(table.path), field, "renamed_" + field)])
    wh = tmp_path / "warehouse.duckdb"
    result = load(one_sim, wh, resources=[selected])
    involved = {selected, route_table, *read_from(TABLES[selected]), *read_from(table)}
    assert result.exit_code == Exit.PARTIAL, (result.exit_code, result.error)
    named = "; ".join(result.unavailable.values())
    assert "missing or null in GET" in named, result.unavailable
    assert any(f"{name}." in named for name in involved), result.unavailable
    if (route_table, field) not in FILLED and wh.exists():
        with duckdb.connect(str(wh), read_only=True) as con:
            loaded = {r[0] for r in con.execute(
                "select table_name from information_schema.columns "
                "where table_schema = 'esper' and column_name = ?", [field]).fetchall()}  # fmt: skip
            if route_table in loaded:
                nulls = f"select count(*) from esper.{route_table} where {field} is null"
                assert con.execute(nulls).fetchone()[0] == 0


def test_the_key_columns_the_loader_fills_are_never_null(sim, tmp_path: Path, first_load) -> None:
    """The key columns left out of the walk above are the loader's own, on every row."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    for table, column in sorted(FILLED):
        assert _count(wh, table) > 0, table
        assert _count(wh, table, f"{column} is null") == 0, (table, column)
