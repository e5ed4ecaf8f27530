"""Esper Pipelines as the spec runs them, through the marts: every run and target run status of
the spec (docs/spec/esper-pipelines-v0-subset.json) is read from the simulator in its first
two nights and shown right by `marts.pipeline_rollout` (open or ended, devices by outcome, stalled
and failing flags, each worked out from the simulator's records alone:
`tests/source/test_pipelines.py::expected_rollout`, `expected_flags`); stage order holds when
the stage list comes back in another order; a groups list stands for the devices in its groups.

The nights are loaded once (`built_once`): the shared full load with its models at the start
(`shared_modelled_load`), then a nightly load (the Pipelines tables, devices and groups) and the
models after each simulated day.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.sources.esper.tables.pipelines import TABLES

from tests.conftest import (
    API_KEY,
    ENTERPRISE_ID,
    SEED,
    SMALL_FLEET,
    FirstLoad,
    built_once,
    copy_warehouse,
)
from tests.pipeline.helpers import load
from tests.source.test_pipelines import OUTCOME, expected_flags, expected_rollout

SPEC = Path(__file__).parents[2] / "docs" / "spec" / "esper-pipelines-v0-subset.json"
SCHEMAS = json.loads(SPEC.read_text())["components"]["schemas"]
RUN_STATUSES = SCHEMAS["PipelineRun"]["properties"]["status"]["enum"]
TARGET_STATUSES = SCHEMAS["TargetRun"]["properties"]["status"]["enum"]
# the showcase runs hold every short-lived status over one of the first two midnights (SHOWCASE,
# simulator/dynamics/pipelines.py); the second also has an open run whose own record is more
# than a day old while its target runs moved
NIGHTS = 2
TRUTHS = ("pipeline_runs", "pipeline_stages", "pipeline_stage_runs", "pipeline_target_runs")
NIGHTLY = [*(t.name for t in TABLES), "devices", "groups"]
COLUMNS = (
    "pipeline_run_id, stage_order, status, target_devices, succeeded_devices, failed_devices, "
    "timed_out_devices, cancelled_devices, in_progress_devices, run_status, is_run_open, "
    "is_stalled, is_failing, stage_run_id"
)
# a target run's status -> the mart's column that counts it
COUNTED_IN = {"success": "succeeded_devices", "failure": "failed_devices",
              "invalid": "failed_devices", "timeout": "timed_out_devices",
              "cancelled": "cancelled_devices"}  # fmt: skip


@dataclass(frozen=True)
class Night:
    """One night's read: the simulator's records then, and the mart's rows built from the load."""

    truth: dict[str, list[dict[str, Any]]]
    rows: list[dict[str, Any]]
    as_of: datetime

    def records(self, table: str) -> list[dict[str, Any]]:
        return self.truth[table]


def _nights(folder: Path, first: Path) -> list[Night]:
    from esper_warehouse.simulator import Simulator

    wh = folder / "warehouse.duckdb"
    copy_warehouse(first, wh)  # the shared full load of this simulator at its start, modelled
    nights = []
    with Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as sim:
        for night in range(NIGHTS + 1):
            if night:
                sim.advance(hours=24)
                result = load(sim, wh, resources=NIGHTLY)
                assert result.exit_code == 0, f"night {night}: {result.error}"
                build_models(wh)
            with duckdb.connect(str(wh), read_only=True) as con:
                cursor = con.execute(f"select {COLUMNS} from marts.pipeline_rollout")
                names = [c[0] for c in cursor.description]
                rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
                (as_of,) = con.execute("select as_of from intermediate.int_as_of").fetchone()
            nights.append(Night({t: sim.truth(t) for t in TRUTHS}, rows, as_of))
    return nights


@pytest.fixture(scope="session")
def nights(
    tmp_path_factory: pytest.TempPathFactory, shared_modelled_load: FirstLoad
) -> list[Night]:
    first = shared_modelled_load.warehouse
    return built_once(tmp_path_factory, "pipeline_nights", lambda f: _nights(f, first))[1]


def _order(night: Night) -> dict[str, int]:
    """Each stage's place in its pipeline: the simulator lists a pipeline's stages in order."""
    places: Counter = Counter()
    order = {}
    for stage in night.records("pipeline_stages"):
        places[stage["pipeline_id"]] += 1
        order[stage["id"]] = places[stage["pipeline_id"]]
    return order


def _assert_shown_right(night: Night, runs: set[str]) -> None:
    """The mart's rows of `runs` on that night: statuses, devices by outcome and the flags as
    the simulator's records say."""
    order = _order(night)
    expected = expected_rollout(night.records, order)
    flags = expected_flags(night.records, order, expected, night.as_of)
    status = {r["id"]: r["status"] for r in night.records("pipeline_runs")}
    rows = [r for r in night.rows if r["pipeline_run_id"] in runs]
    assert rows
    for row in rows:
        key = (row["pipeline_run_id"], row["stage_order"])
        assert row["run_status"] == status[row["pipeline_run_id"]]
        assert row["is_run_open"] == (row["run_status"] not in OUTCOME), key
        got = tuple(row[c] for c in COLUMNS.split(", ")[2:9])
        assert got == expected[key], key
        assert (row["is_stalled"], row["is_failing"]) == flags[key], key


@pytest.mark.parametrize("status", RUN_STATUSES)
def test_every_run_status_is_read_in_two_nights_and_shown_right(
    nights: list[Night], status
) -> None:
    """Each run status of the spec is served on one of the nights, and the mart shows those
    runs as their records say (a complete run is still open: it moves on to an outcome)."""
    seen = [
        (night, {r["id"] for r in night.records("pipeline_runs") if r["status"] == status})
        for night in nights
    ]
    night, runs = next(((n, r) for n, r in seen if r), (None, set()))
    assert night is not None, f"no run {status} in {len(nights)} nights"
    _assert_shown_right(night, runs)
    open_ = {r["pipeline_run_id"] for r in night.rows if r["is_run_open"]}
    assert (runs <= open_) == (status not in OUTCOME)
    assert (not runs & open_) == (status in OUTCOME)


@pytest.mark.parametrize("status", TARGET_STATUSES)
def test_every_target_run_status_is_read_in_two_nights_and_counted_right(
    nights: list[Night], status
) -> None:
    """Each target run status of the spec is served on one of the nights; its stage's row
    counts it where it belongs (an outcome's column, else in progress: a complete target run
    still moves on to success or failure)."""
    found = None
    for night in nights:
        targets = [t for t in night.records("pipeline_target_runs") if t["status"] == status]
        if targets:
            found = night, targets
            break
    assert found is not None, f"no target run {status} in {len(nights)} nights"
    night, targets = found
    stage_run_of = {s["id"]: s["pipeline_run_id"] for s in night.records("pipeline_stage_runs")}
    _assert_shown_right(night, {stage_run_of[t["stage_run_id"]] for t in targets})
    per_stage_run = Counter(t["stage_run_id"] for t in targets)
    column = COUNTED_IN.get(status, "in_progress_devices")
    for stage_run, n in per_stage_run.items():
        (row,) = [r for r in night.rows if r["stage_run_id"] == stage_run]
        assert row[column] >= n, (status, column)


def test_a_run_whose_devices_moved_recently_is_not_stalled(nights: list[Night]) -> None:
    """Stalled reads the newest change anywhere in the run: on some night an open run's own
    record is more than 24 hours old while its target runs changed since; it is not stalled,
    and the runs that are stalled had no change anywhere for more than 24 hours."""
    cases = 0
    for night in nights:
        order = _order(night)
        flags = expected_flags(night.records, order, expected_rollout(night.records, order),
                               night.as_of)  # fmt: skip
        stalled = {r["pipeline_run_id"] for r in night.rows if r["is_stalled"]}
        assert stalled == {run for (run, _), (s, _f) in flags.items() if s}
        for run in night.records("pipeline_runs"):
            updated = datetime.fromisoformat(run["updated_at"].replace("Z", "+00:00"))
            old = (night.as_of - updated).total_seconds() > 24 * 3600
            if run["status"] not in OUTCOME and run["status"] != "waiting" and old:
                cases += run["id"] not in stalled
    assert cases, "no open run with an old record and recent target runs in the nights"


def _places(stages: list[dict[str, Any]]) -> dict[str, int]:
    """Each stage's place in its pipeline's list, from 1."""
    places: Counter = Counter()
    out = {}
    for stage in stages:
        places[stage["pipeline_id"]] += 1
        out[stage["id"]] = places[stage["pipeline_id"]]
    return out


def test_stage_order_holds_when_the_stage_list_comes_back_reversed(
    sim, tmp_path: Path, first_load
) -> None:
    """The spec gives stages no order field (docs/contracts.md): a night whose stage lists come
    back reversed changes the list positions the loader records, not the mart's stage order,
    which the runs' stage runs tell; a groups list stands for the devices in its groups (and
    their subgroups), as the simulator's devices and groups say."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "reversed", "route": "/pipelines/v0/pipelines/*/stages/"}])
    sim.advance(hours=24)
    assert load(sim, wh, resources=NIGHTLY).exit_code == 0
    build_models(wh)
    truth = _places(sim.truth("pipeline_stages"))
    with duckdb.connect(str(wh), read_only=True) as con:
        listed = dict(
            con.execute(
                "select stage_id, stage_order from staging.stg_esper__pipeline_stages"
            ).fetchall()
        )
        shown = con.execute(
            "select distinct stage_id, stage_order, target_type, planned_devices "
            "from marts.pipeline_rollout where stage_id is not null"
        ).fetchall()
    assert listed != truth  # the fault reversed the lists
    reached = {s["stage_id"] for s in sim.truth("pipeline_stage_runs")}
    # the runs reached most stages; those none reached follow, in list order (here the last)
    assert len(reached & set(truth)) >= len(truth) - 1
    assert {stage: order for stage, order, *_ in shown} == truth

    parent = {g["id"]: (g["parent"] or "").rstrip("/").split("/")[-1] for g in sim.truth("groups")}

    def within(group: str | None, listed_groups: set[str]) -> bool:
        while group:
            if group in listed_groups:
                return True
            group = parent.get(group)
        return False

    groups: dict[str, set[str]] = {}
    devices: dict[str, set[str]] = {}
    for target in sim.truth("pipeline_stage_targets"):
        if target["target_list_type"] == "GROUPS":
            groups.setdefault(target["stage_id"], set()).add(target["device_group_id"])
        else:
            devices.setdefault(target["stage_id"], set()).add(target["device_id"])
    for stage, members in groups.items():
        devices[stage] = {d["id"] for d in sim.truth("devices") if within(d["group_id"], members)}
    planned = {stage: n for stage, _order, _type, n in shown}
    assert planned == {stage: len(ids) for stage, ids in devices.items()}
    kinds = {kind for _s, _o, kind, _n in shown}
    assert "groups" in kinds
    group_stages = [s for s, _o, kind, _n in shown if kind == "groups"]
    assert all(planned[s] > len(groups[s]) for s in group_stages)  # devices, not groups
