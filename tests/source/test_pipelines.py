"""Esper Pipelines: each raw table equals the simulator's truth after a first load and after a
night; a run that had ended costs no request the next night; a key without `read:pipeline`
loads everything else and names the tables it skipped."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.models import build_models
from esper_warehouse.pipelines.run_types import EXIT_PARTIAL
from esper_warehouse.sources.esper.tables.pipelines import RUN_ENDED, TABLES

from tests.pipeline.helpers import load

NAMES = [t.name for t in TABLES]
STAGE_RUNS_ROUTE = "GET /pipelines/v0/runs/{pipeline_run_id}/stageruns/"
COLUMNS = {
    "pipelines": ["id", "name", "timeout_seconds"],
    "pipeline_stages": ["id", "pipeline_id", "name"],
    "pipeline_runs": ["id", "pipeline_id", "run_number", "status"],
    "pipeline_stage_runs": ["id", "pipeline_run_id", "stage_id", "status"],
    "pipeline_stage_run_operations": ["id", "operation_type", "args"],
    "pipeline_target_runs": ["id", "stage_run_id", "device_id", "status", "command_id"],
}


def _assert_equal_to_truth(sim, wh: Path) -> None:
    with duckdb.connect(str(wh), read_only=True) as con:
        for table, columns in COLUMNS.items():
            raw = con.execute(f"select {', '.join(columns)} from esper.{table} order by id")
            truth = sorted(sim.truth(table), key=lambda r: r["id"])
            assert truth, table
            assert raw.fetchall() == [tuple(r[c] for c in columns) for r in truth], table


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


def test_a_key_without_read_pipeline_loads_everything_else(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/*"}])
    sim.advance(hours=24)
    nightly = load(sim, wh)
    assert nightly.exit_code == EXIT_PARTIAL, nightly.error
    assert set(nightly.unavailable) == set(NAMES)
    assert nightly.rows.get("groups")
    with duckdb.connect(str(wh), read_only=True) as con:  # what was loaded is kept
        assert con.execute("select count(*) from esper.pipeline_runs").fetchone()[0] > 0
