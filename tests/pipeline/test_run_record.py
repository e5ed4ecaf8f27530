"""A run's record in the warehouse (`_esper_runs`, `_esper_reconciliation`) holds what the run
returned, value for value and typed: `status`, the freshness model and the marts read it there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson
from esper_warehouse.pipelines.run.runner import RunResult

from tests.pipeline.helpers import load


def _record(wh: Path, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with duckdb.connect(str(wh), read_only=True) as con:
        cursor = con.execute("select * from esper._esper_runs where run_id = ?", [run_id])
        names = [d[0] for d in cursor.description]
        (run,) = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        cursor = con.execute(
            "select * from esper._esper_reconciliation where run_id = ? order by table_name",
            [run_id],
        )
        names = [d[0] for d in cursor.description]
        checks = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        types = dict(
            con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = 'esper' and table_name = '_esper_runs'"
            ).fetchall()
        )
    assert types["started_at"] == "TIMESTAMP WITH TIME ZONE" and types["rows"] == "JSON"
    assert types["answered_per_s"] == "DOUBLE" and types["requests"] == "BIGINT"
    return run, checks


def _same_record(wh: Path, result: RunResult) -> None:
    run, checks = _record(wh, result.run_id)
    assert checks == sorted(result.reconciliation, key=lambda r: r["table_name"])
    assert {k: run[k] for k in ("mode", "status", "requests", "retries", "throttled", "error")} == {
        "mode": result.mode,
        "status": result.status,
        "requests": result.requests,
        "retries": result.retries,
        "throttled": result.throttled,
        "error": result.error,
    }
    assert (run["answered"], run["answered_per_s"], run["pace"], run["device_count"]) == (
        result.answered,
        result.answered_per_s,
        result.pace,
        result.device_count,
    )
    assert orjson.loads(run["rows"]) == result.rows
    assert orjson.loads(run["tables"]) == result.tables
    assert run["as_of"] == result.as_of and run["started_at"] <= run["finished_at"]


def test_each_run_records_its_row_and_every_reconciliation_row_it_returned(sim, wh: Path) -> None:
    first = load(sim, wh)
    assert first.exit_code == 0, first.error
    assert len(first.reconciliation) > 20  # every completely read table of a first load
    _same_record(wh, first)
    sim.advance(hours=24)
    nightly = load(sim, wh, resources=["devices", "groups"])
    assert nightly.exit_code == 0, nightly.error
    assert nightly.reconciliation, "a nightly reconciles the lists it read whole"
    _same_record(wh, nightly)
    with duckdb.connect(str(wh), read_only=True) as con:
        runs = con.execute("select count(*) from esper._esper_runs").fetchone()
        checks = con.execute("select count(*) from esper._esper_reconciliation").fetchone()
    assert runs == (2,) and checks == (len(first.reconciliation) + len(nightly.reconciliation),)
