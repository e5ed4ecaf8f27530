"""Esper Pipelines: each raw table equals the simulator's truth after a first load and after a
night; a run that had ended costs no request the next night; a key without `read:pipeline`
loads everything else and names the tables it skipped; a refused stage list keeps the stages'
plans as loaded."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.sources.esper.tables.pipelines import RUN_ENDED, TABLES

from tests.pipeline.helpers import load

NAMES = [t.name for t in TABLES]
Truth = Callable[[str], list[dict]]  # a table's records by name
STAGE_RUNS_ROUTE = "GET /pipelines/v0/runs/{pipeline_run_id}/stageruns/"
STAGES_ROUTE = "GET /pipelines/v0/pipelines/{pipeline_id}/stages/"
COLUMNS = {
    "pipelines": ["id", "name", "timeout_seconds"],
    "pipeline_stages": ["id", "pipeline_id", "name"],
    "pipeline_runs": ["id", "pipeline_id", "run_number", "status"],
    "pipeline_stage_runs": ["id", "pipeline_run_id", "stage_id", "status"],
    "pipeline_stage_run_operations": ["id", "operation_type", "args"],
    "pipeline_target_runs": ["id", "stage_run_id", "device_id", "status", "command_id"],
    "pipeline_stage_operations": ["id", "stage_id", "operation_list_id", "operation_type", "args"],
    "pipeline_stage_targets": ["id", "stage_id", "target_list_id", "target_list_type",
                               "device_id", "device_name", "device_group_id", "is_active"],
}  # fmt: skip
PLANS = ["pipeline_stage_operations", "pipeline_stage_targets"]


def _truth(sim, table: str) -> Counter:
    return Counter(tuple(r.get(c) for c in COLUMNS[table]) for r in sim.truth(table))


def _assert_equal_to_truth(sim, wh: Path, truths: dict[str, Counter] | None = None) -> None:
    truths = truths or {table: _truth(sim, table) for table in COLUMNS}
    with duckdb.connect(str(wh), read_only=True) as con:
        for table, truth in truths.items():
            raw = con.execute(f"select {', '.join(COLUMNS[table])} from esper.{table}").fetchall()
            assert truth, table
            assert len(raw) == sum(truth.values()) and Counter(raw) == truth, table


def test_pipelines_equal_the_truth_first_and_after_a_night(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)
    assert first.exit_code == 0, first.error
    _assert_equal_to_truth(sim, wh)

    runs = sim.truth("pipeline_runs")
    ended = {r["id"] for r in runs if r["status"] in RUN_ENDED}
    assert ended and len(ended) < len(runs)  # the simulator holds both kinds
    sim.advance(hours=24)
    sim.reset_stats()
    nightly = load(sim, wh)
    assert nightly.exit_code == 0, nightly.error
    _assert_equal_to_truth(sim, wh)
    # a run that had ended is not read again: only the others' stage runs are asked for
    asked = sim.stats()["routes"].get(STAGE_RUNS_ROUTE, 0)
    assert 0 < asked <= len(sim.truth("pipeline_runs")) - len(ended)
    # each pipeline's stages are read once: `pipeline_stages` and the stage plans share the read
    assert sim.stats()["routes"].get(STAGES_ROUTE) == len(sim.truth("pipelines"))

    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        staged = con.execute(
            "select stage_id, stage_order from staging.stg_esper__pipeline_stages"
        ).fetchall()
    truth = sim.truth("pipeline_stages")
    order = {}
    for stage in truth:  # the API lists a pipeline's stages in order
        order[stage["id"]] = sum(1 for s in truth[: truth.index(stage) + 1]
                                 if s["pipeline_id"] == stage["pipeline_id"])  # fmt: skip
    assert dict(staged) == order
    _assert_marts_equal_the_truth(sim, wh, order)
    _assert_plans_in_the_rollout(sim, wh, order)


# a target run's outcome by its status; the others (pending ... running, and complete: it still
# moves on to success or failure, the spec's tag description) have none yet
ENDED = {"success": "succeeded", "failure": "failed", "invalid": "failed",
         "timeout": "timed_out", "cancelled": "cancelled"}  # fmt: skip
# the spec's run statuses with an outcome; a complete run still moves on to success or failure
OUTCOME = {"success", "failure", "cancelled", "invalid", "timeout"}


def expected_rollout(truth: Truth, order: dict[str, int]) -> dict[tuple, tuple]:
    """(run id, stage order) -> (status, targets, succeeded, failed, timed out, cancelled, in
    progress), computed from the API's records alone (`truth(table)`: the simulator's, or the
    raw tables')."""
    stage_run = {(s["pipeline_run_id"], s["stage_id"]): s for s in truth("pipeline_stage_runs")}
    targets: dict[str, Counter] = {}
    for t in truth("pipeline_target_runs"):
        targets.setdefault(t["stage_run_id"], Counter())[ENDED.get(t["status"], "in_progress")] += 1
    expected = {}
    kinds = ("succeeded", "failed", "timed_out", "cancelled", "in_progress")
    for run in truth("pipeline_runs"):
        if not any(s["pipeline_id"] == run["pipeline_id"] for s in truth("pipeline_stages")):
            expected[(run["id"], None)] = ("not_started", 0, *(0 for _ in kinds))  # no stage
        for stage in truth("pipeline_stages"):
            if stage["pipeline_id"] != run["pipeline_id"]:
                continue
            sr = stage_run.get((run["id"], stage["id"]))
            c = targets.get(sr["id"], Counter()) if sr else Counter()
            expected[(run["id"], order[stage["id"]])] = (
                sr["status"] if sr else "not_started",
                sum(c.values()),
                *(c[k] for k in kinds),
            )
    return expected


def expected_flags(
    truth: Truth, order: dict[str, int], rollout: dict[tuple, tuple], as_of: datetime
) -> dict[tuple, tuple[bool, bool]]:
    """(run id, stage order) -> (is_stalled, is_failing) by the definitions of docs/guide/warehouse.md, from the
    API's records: a run not ended and not waiting in which nothing (the run, its stage runs,
    their target runs) changed for more than 24 hours is stalled at its last stage reached (its
    first when none is); a run not ended fails at its last stage reached when more than 10 % of
    that stage's devices failed or timed out."""
    reached: dict[str, list[int]] = {}
    changed: dict[str, list[datetime]] = {}
    run_of = {}
    for stage_run in truth("pipeline_stage_runs"):
        reached.setdefault(stage_run["pipeline_run_id"], []).append(order[stage_run["stage_id"]])
        run_of[stage_run["id"]] = stage_run["pipeline_run_id"]
        changed.setdefault(stage_run["pipeline_run_id"], []).append(_time(stage_run["updated_at"]))
    for target_run in truth("pipeline_target_runs"):
        changed[run_of[target_run["stage_run_id"]]].append(_time(target_run["updated_at"]))
    flags = {}
    for run in truth("pipeline_runs"):
        stages = sorted(o for (r, o) in rollout if r == run["id"] and o is not None)
        last = max(reached.get(run["id"], []), default=None)
        held = last if last is not None else (stages or [None])[0]
        is_open = run["status"] not in OUTCOME
        updated = max([_time(run["updated_at"]), *changed.get(run["id"], [])])
        stalled = is_open and run["status"] != "waiting" and updated < as_of - timedelta(hours=24)
        if not stages:  # a pipeline without stages: one row, no stage, no flag
            flags[(run["id"], None)] = (False, False)
        for stage in stages:
            _, targets, _, failed, timed_out, *_ = rollout[(run["id"], stage)]
            failing = is_open and stage == last and failed + timed_out > 0.10 * targets
            flags[(run["id"], stage)] = (stalled and stage == held, failing)
    return flags


def _time(value: str | datetime) -> datetime:
    """A timestamp as the API (ISO text) or the warehouse (a datetime) gives it."""
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _assert_marts_equal_the_truth(sim, wh: Path, order: dict[str, int]) -> None:
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(
            "select pipeline_run_id, stage_order, status, target_devices, succeeded_devices, "
            "failed_devices, timed_out_devices, cancelled_devices, in_progress_devices, "
            "is_stalled, is_failing "
            "from marts.pipeline_rollout"
        ).fetchall()
        current = con.execute(
            "select pipeline_id, run_number, run_status, pipeline_run_id, is_stalled, is_failing "
            "from marts.pipeline_rollout_current"
        ).fetchall()
        counted = {
            headline: (value, denominator)
            for headline, value, denominator in con.execute(
                "select headline, value, denominator from marts.headlines "
                "where headline like 'pipeline_runs_%' and item is null"
            ).fetchall()
        }
        named = con.execute(
            "select headline, list(item order by item) from marts.headlines "
            "where headline like 'pipeline_runs_%' and item is not null group by headline"
        ).fetchall()
        (as_of,) = con.execute("select as_of from intermediate.int_as_of").fetchone()
    expected = expected_rollout(sim.truth, order)
    assert {(r[0], r[1]): tuple(r[2:9]) for r in rows} == expected
    assert len(rows) == len(expected)
    assert any(v[2] for v in expected.values())  # some stages have succeeded targets
    flags = expected_flags(sim.truth, order, expected, as_of)
    assert {(r[0], r[1]): (r[9], r[10]) for r in rows} == flags
    assert any(failing for _, failing in flags.values())
    statuses = [r["status"] for r in sim.truth("pipeline_runs")]
    open_runs = [s for s in statuses if s not in OUTCOME]
    assert counted["pipeline_runs_waiting"] == (open_runs.count("waiting"), len(open_runs))
    for kind, at in (("stalled", 0), ("failing", 1)):
        runs = {run for (run, _), flag in flags.items() if flag[at]}
        assert counted[f"pipeline_runs_{kind}"] == (len(runs), len(open_runs)), kind
        assert dict(named).get(f"pipeline_runs_{kind}", []) == sorted(runs), kind
    waiting_runs = sorted(r["id"] for r in sim.truth("pipeline_runs") if r["status"] == "waiting")
    assert dict(named).get("pipeline_runs_waiting", []) == waiting_runs
    latest: dict[str, dict] = {}
    for run in sim.truth("pipeline_runs"):
        if run["run_number"] > latest.get(run["pipeline_id"], {"run_number": 0})["run_number"]:
            latest[run["pipeline_id"]] = run
    assert sorted(r[:3] for r in current) == sorted(
        (p, r["run_number"], r["status"]) for p, r in latest.items()
    )
    for *_, run_id, stalled, failing in current:  # the run's flags, on whichever stage they are
        run_flags = [f for (r, _), f in flags.items() if r == run_id]
        assert (stalled, failing) == tuple(any(f[i] for f in run_flags) for i in (0, 1))


def _assert_plans_in_the_rollout(sim, wh: Path, order: dict[str, int]) -> None:
    """Each (run, stage) of `marts.pipeline_rollout` says what the stage will do and to whom,
    as the simulator's stages' lists say, reached or not."""
    ops = {o["stage_id"]: o for o in sim.truth("pipeline_stage_operations")}
    targets: dict[str, list[dict]] = {}
    for t in sim.truth("pipeline_stage_targets"):
        targets.setdefault(t["stage_id"], []).append(t)
    names = {a["package_name"]: a["application_name"] for a in sim.truth("applications")}
    # the version lists loaded (v1, live route 6) carry no release name: the code is shown
    versions = {v["id"]: f"version code {v['version_code']}"
                for v in sim.truth("application_versions")}  # fmt: skip
    released = {}  # run -> the app version its stage runs' operations carry
    stage_runs = sim.truth("pipeline_stage_runs")
    for sr, op in zip(stage_runs, sim.truth("pipeline_stage_run_operations"), strict=True):
        version = json.loads(op["args"]).get("app_version")
        if version:
            released[sr["pipeline_run_id"]] = versions[version]
    expected = {}
    for run in sim.truth("pipeline_runs"):
        if not any(s["pipeline_id"] == run["pipeline_id"] for s in sim.truth("pipeline_stages")):
            expected[(run["id"], None)] = (None, None, None, 0)  # a pipeline without stages
        for stage in sim.truth("pipeline_stages"):
            if stage["pipeline_id"] != run["pipeline_id"]:
                continue
            op = ops[stage["id"]]
            package = json.loads(op["args"]).get("package_name")
            summary = (" ".join(filter(None, (names[package], released.get(run["id"]))))
                       if op["operation_type"] == "INSTALL" else op["operation_type"])  # fmt: skip
            listed = targets[stage["id"]]
            expected[(run["id"], order[stage["id"]])] = (
                op["operation_type"], summary,
                listed[0]["target_list_type"].lower(), len(listed),
            )  # fmt: skip
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(
            "select pipeline_run_id, stage_order, operation_type, operation_summary, target_type, "
            "planned_targets from marts.pipeline_rollout"
        ).fetchall()
    assert {(r[0], r[1]): tuple(r[2:]) for r in rows} == expected
    kinds = {v[2] for v in expected.values()} - {None}
    assert kinds == {"devices", "groups"}  # the simulator holds both kinds of target lists
    assert any("version code" in v[1] for v in expected.values())  # a run's release shown


def test_a_key_without_read_pipeline_loads_everything_else(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/*"}])
    sim.advance(hours=24)
    nightly = load(sim, wh)
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == set(NAMES) and set(PLANS) <= set(NAMES)
    assert nightly.rows.get("groups")
    with duckdb.connect(str(wh), read_only=True) as con:  # what was loaded is kept
        for table in ("pipeline_runs", "pipeline_stages", *PLANS):
            assert con.execute(f"select count(*) from esper.{table}").fetchone()[0] > 0, table


def test_a_stage_list_refused_keeps_the_plans_as_loaded(sim, tmp_path: Path, first_load) -> None:
    """A 403 on one stage's target lists: the stages' targets are kept whole as loaded (a
    replaced table would lose that stage's rows), named; the operations still replace."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    loaded = _truth(sim, "pipeline_stage_targets")
    stage = sim.truth("pipeline_stages")[0]["id"]
    sim.set_faults([{"kind": "status", "status": 403,
                     "route": f"/pipelines/v0/stages/{stage}/targetlists/"}])  # fmt: skip
    sim.advance(hours=24)
    nightly = load(sim, wh, resources=PLANS)
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"pipeline_stage_targets"}
    assert (  # the route and status refused, named for the table they belong to
        "1 pipeline stage(s) skipped: GET /pipelines/v0/stages/{id}/targetlists/ answered 403"
        in nightly.unavailable["pipeline_stage_targets"]
    )
    _assert_equal_to_truth(sim, wh, {"pipeline_stage_targets": loaded,
                                     "pipeline_stage_operations": _truth(sim, PLANS[0])})  # fmt: skip


def test_a_complete_run_is_read_again_until_it_has_its_outcome(
    sim, tmp_path: Path, first_load
) -> None:
    """The spec: a complete run still moves on to success or failure. A run complete last night
    whose record has not moved since (Wi-Fi settings' run of the first day at 20:00, complete with
    its stage run before their outcome) has its stage run and target run read again tonight: the
    warehouse shows their success, and the mart counts the device succeeded."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    assert load(sim, wh, resources=NAMES).exit_code == 0
    last_night = {r["id"]: r for r in sim.truth("pipeline_runs") if r["status"] == "complete"}
    assert last_night, "the simulator holds a complete run"
    sim.advance(hours=24)
    held = {r["id"] for r in sim.truth("pipeline_runs")
            if r["id"] in last_night and r["status"] == "complete"
            and r["updated_at"] == last_night[r["id"]]["updated_at"]}  # fmt: skip
    assert held, "a run still complete, its record unmoved"
    stage_runs = {s["id"]: s["status"] for s in sim.truth("pipeline_stage_runs")
                  if s["pipeline_run_id"] in held}  # fmt: skip
    targets = {t["id"]: t["status"] for t in sim.truth("pipeline_target_runs")
               if t["stage_run_id"] in stage_runs}  # fmt: skip
    assert set(stage_runs.values()) == set(targets.values()) == {"success"}
    assert load(sim, wh, resources=NAMES).exit_code == 0
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        loaded = dict(con.execute("select id, status from esper.pipeline_stage_runs").fetchall())
        loaded_targets = dict(
            con.execute("select id, status from esper.pipeline_target_runs").fetchall()
        )
        counted = con.execute(
            "select pipeline_run_id, run_status, target_devices, succeeded_devices, "
            "in_progress_devices from marts.pipeline_rollout where stage_order is not null"
        ).fetchall()
    assert {s: loaded[s] for s in stage_runs} == stage_runs
    assert {t: loaded_targets[t] for t in targets} == targets
    shown = {run: (status, *n) for run, status, *n in counted if run in held}
    assert shown == {run: ("complete", len(targets), len(targets), 0) for run in held}
