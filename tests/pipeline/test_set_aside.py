"""Issue 51, rule 2: a bad record costs only its table.

A record served without its table's key (or cursor, or parent key) is set aside: never loaded,
never keyed `(None,)`. Its table is kept as it was (a whole list is not replaced by one lacking
an item; a merged table loads the rest), named with `table.column`, the route and the count;
every other table loads and the run is partial (exit 6). What was set aside is kept, redacted and
cut, in `esper._esper_rejected`. The simulator's drift fault serves the null keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.sources.esper.tables.catalogues import GROUPS
from esper_warehouse.sources.esper.tables.devices import DEVICES
from esper_warehouse.sources.esper.tables.events import DEVICE_EVENTS
from esper_warehouse.sources.esper.tables.pipelines import PIPELINE_STAGE_RUNS

from tests.conftest import API_KEY
from tests.pipeline.helpers import TABLES, compare, load
from tests.routes import glob


def _null(route: str, ids: list[str], field: str = "id") -> dict[str, Any]:
    return {"kind": "drift", "variant": "value", "route": route, "field": field, "value": None,
            "ids": ids}  # fmt: skip


def _rows(wh: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql).fetchall()


def _partial_naming(result: Any, table: str, column: str, route: str, count: int = 1) -> None:
    assert result.exit_code == Exit.PARTIAL, (result.exit_code, result.error)
    why = result.unavailable[table]
    assert f"{count} record(s) set aside: {table}.{column} missing or null in GET {route}" in why


def _rejected(wh: Path, table: str) -> list[tuple]:
    return _rows(
        wh,
        "select run_id, route, column_name, record from esper._esper_rejected "
        f"where table_name = '{table}' order by rejected_at",
    )


def test_a_null_group_id_for_three_nights_costs_only_groups(sim, tmp_path: Path, first_load):
    """One of the groups served with `id: null` (and, to test the redaction, the API key in its
    name) three nights running: each night every other table equals the API's truth, groups
    keeps its last good rows, the run is partial naming `groups.id`, and the record set aside
    is readable in `_esper_rejected` without the key."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == Exit.OK
    good = _rows(wh, "select id, name, device_count from esper.groups order by id")
    bad = good[0][0]
    route = glob(GROUPS)
    sim.set_faults([
        {"kind": "drift", "variant": "value", "route": route, "field": "name",
         "value": f"Bearer {API_KEY}", "ids": [bad]},
        _null(route, [bad]),
    ])  # fmt: skip
    runs = set()
    for _night in range(3):
        sim.advance(hours=24)
        result = load(sim, wh)
        _partial_naming(result, "groups", "id", GROUPS.path)
        assert set(result.unavailable) == {"groups"}, result.unavailable
        assert result.tables["groups"]["treatment"] == "kept"
        assert _rows(wh, "select id, name, device_count from esper.groups order by id") == good
        for table in TABLES:
            if table != "groups":
                compare(sim, wh, table, exact=False)
        runs.add(result.run_id)
    rejected = _rejected(wh, "groups")
    assert {r[0] for r in rejected} == runs and len(rejected) == 3
    assert {(r[1], r[2]) for r in rejected} == {(GROUPS.path, "id")}
    record = rejected[0][3]
    assert '"id":null' in record and "[redacted]" in record
    assert API_KEY not in record
    assert not _rows(wh, f"select * from esper._esper_runs where cast(unavailable as varchar) "
                         f"like '%{API_KEY}%' or error like '%{API_KEY}%'")  # fmt: skip
    sim.set_faults([])  # the API serves the id again: groups load, the run is whole
    sim.advance(hours=24)
    assert load(sim, wh).exit_code == Exit.OK
    compare(sim, wh, "groups")


def test_a_device_without_its_id_is_set_aside_and_the_devices_load(sim, tmp_path: Path):
    """A device item with `id: null` on the device list (first load: a full scan): the list's
    paging does not need the id, so the night goes on; the other devices, their apps and every
    other table load; the run is partial naming `devices.id`."""
    wh = tmp_path / "warehouse.duckdb"
    truth = [d["id"] for d in sim.truth("devices")]
    sim.set_faults([_null(glob(DEVICES), [truth[3]])])
    result = load(sim, wh)
    _partial_naming(result, "devices", "id", DEVICES.path)
    assert result.tables["devices"]["treatment"] == "partial"
    assert result.tables["device_census"]["treatment"] == "kept"  # a census lacking one: no
    ids = {r[0] for r in _rows(wh, "select id from esper.devices")}
    assert ids == set(truth) - {truth[3]}
    assert not _rows(wh, "select * from esper.devices where id is null")
    for table in ("command_statuses", "groups", "pipeline_target_runs"):
        compare(sim, wh, table)
    # the events of every other device (its own feed is read by its id, which it lacks)
    events = {e["id"] for e in sim.truth("device_events") if e["device_id"] != truth[3]}
    assert events <= {r[0] for r in _rows(wh, "select id from esper.device_events")}
    assert [r[2] for r in _rejected(wh, "devices")] == ["id"]


def test_events_and_pipeline_stage_runs_without_their_ids(sim, tmp_path: Path, first_load):
    """A per-device list (one event of a device's feed) and a Pipelines child (one stage run)
    served with `id: null` on a nightly: each merged table loads the rest and lacks that record;
    the run is partial naming both, and the other tables equal the truth."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == Exit.OK
    sim.advance(hours=24)
    event = sim.truth("device_events")[-1]
    stage_run = sim.truth("pipeline_stage_runs")[-1]
    sim.set_faults([
        _null(glob(DEVICE_EVENTS), [event["id"]]),
        _null(glob(PIPELINE_STAGE_RUNS), [stage_run["id"]]),
    ])  # fmt: skip
    result = load(sim, wh, full=True)  # reads every feed whole: the event is served
    _partial_naming(result, "device_events", "id", DEVICE_EVENTS.path)
    _partial_naming(result, "pipeline_stage_runs", "id", PIPELINE_STAGE_RUNS.path)
    assert set(result.unavailable) == {"device_events", "pipeline_stage_runs"}
    for table, record in (("device_events", event), ("pipeline_stage_runs", stage_run)):
        assert result.tables[table]["treatment"] == "partial"
        assert not _rows(wh, f"select * from esper.{table} where id is null")
        others = {r[0] for r in _rows(wh, f"select id from esper.{table}")}
        expected = {str(t["id"]) for t in sim.truth(table)}
        assert {str(i) for i in others} >= expected - {str(record["id"])}
        assert [r[2] for r in _rejected(wh, table)] == ["id"]
    for table in ("devices", "groups", "command_statuses", "pipeline_runs"):
        compare(sim, wh, table, exact=False)
