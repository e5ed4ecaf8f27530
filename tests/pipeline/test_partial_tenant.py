"""Partial tenants: a route the key may not read skips its table; everything else loads."""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views.status import status

from .helpers import TABLES, cli, compare, load, reading, rows

STATUS_METRICS = "/v2/enterprise/*/report/status-metrics*"


# In parts of 40 devices, the 120-device fleet is loaded in four parts (as in test_resume.py); every
# part costs a dlt run (~0.9 CPU-s), so parts of 5 took 25 CPU-s for the same assertions.
# The first load alone loads the refused table and the compared ones ("Scenario tests load the
# tables they check", docs/decisions.md): a selection is never loaded in parts (runner.py), so the
# load in parts is of the whole tenant, as is the command-line run below.
# Without parts, a refused table is also test_geofences.py's and test_credentials.py's: that
# variant is in the slow tier (docs/decisions.md, "The slow tier").
@pytest.mark.parametrize(
    "parts",
    [pytest.param(None, marks=pytest.mark.slow), 40],
    ids=["first_load", "first_load_in_parts"],
)
def test_a_refused_status_metrics_route_skips_only_that_table(
    sim, wh: Path, parts: int | None, capsys
) -> None:
    sim.set_faults([{"kind": "status", "status": 403, "route": STATUS_METRICS}])
    if parts:
        extra: dict = {"source_options": {"commit_every_devices": parts}}
    else:
        extra = {"resources": [*TABLES, "status_metrics"]}
    result = load(sim, wh, **extra)

    assert result.exit_code == Exit.PARTIAL, result.error
    assert result.status == "partial"
    assert set(result.unavailable) == {"status_metrics"}
    assert "403" in result.unavailable["status_metrics"]
    assert "check the" not in (result.error or "")
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)
    assert all(r["ok"] for r in result.reconciliation)
    with duckdb.connect(str(wh), read_only=True) as con:
        (recorded,) = con.execute(
            "select unavailable from esper._esper_runs order by started_at desc limit 1"
        ).fetchone()
    assert set(orjson.loads(recorded)) == {"status_metrics"}

    capsys.readouterr()
    assert status(wh) == 0
    shown = capsys.readouterr().out
    assert "unavailable in the last run" in shown and "status_metrics" in shown


def test_the_cli_exits_partial_with_one_line_and_no_traceback(sim, wh: Path) -> None:
    sim.set_faults([{"kind": "status", "status": 403, "route": STATUS_METRICS}])
    proc = cli(sim, wh, "run")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == Exit.PARTIAL, err
    text = out + err
    assert "Traceback" not in text and "generator already executing" not in text
    skipped = [line for line in text.splitlines() if "status_metrics: not loaded" in line]
    assert len(skipped) == 1, text
    assert "GET /v2/enterprise/" in skipped[0] and "/report/status-metrics" in skipped[0]
    assert "403" in skipped[0]
    assert "check the key" not in text


def test_a_403_on_the_first_request_is_still_the_key(sim, wh: Path) -> None:
    sim.set_faults([{"kind": "status", "status": 403}])
    proc = cli(sim, wh, "run")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == Exit.CONFIG, err
    assert "check the key" in out + err


FEED = "/enterprise/*/device/*/download/eventfeed/*"


def test_a_refused_legacy_feed_skips_only_those_devices_and_counts_them(sim, wh: Path) -> None:
    sim.set_faults([{"kind": "legacy_feed_android_only", "route": FEED}])
    devices = sim.truth("devices")
    android = {d["id"] for d in devices if d["platform"] == "ANDROID"}
    others = {d["id"] for d in devices} - android
    assert android and others  # the fleet mixes platforms, so the test can tell them apart

    feeds = ["devices", "device_events"]  # the list of devices, and their feeds
    result = load(sim, wh, resources=feeds)

    assert result.exit_code == Exit.PARTIAL, result.error
    why = result.unavailable["device_events"]
    assert why.startswith(f"{len(others)} device(s) skipped: ")
    assert "/download/eventfeed/ answered 400" in why
    assert set(result.unavailable) == {"device_events"}
    truth = {(e["id"], e["device_id"]) for e in sim.truth("device_events")}
    stored = set(rows(wh, "device_events", ("id", "device_id")))
    assert stored == {e for e in truth if e[1] in android}  # every Android event, no other
    assert any(e[1] in others for e in truth)  # the skipped devices do have events
    assert all(r["ok"] for r in result.reconciliation)

    # The skipped feeds left no watermark behind, and the next run asks them again (no device
    # changed meanwhile): once the API serves them, they load whole.
    sim.clear_faults()
    again = load(sim, wh, resources=feeds)
    assert again.mode == "incremental"
    assert again.exit_code == 0, again.error
    with reading(wh):
        compare(sim, wh, "device_events")


def test_the_tenant_runner_treats_partial_as_loaded_never_hiding_a_failure() -> None:
    from esper_warehouse.pipelines.exit_codes import Exit
    from esper_warehouse.pipelines.jobs.tenants import exit_code, summary
    from esper_warehouse.pipelines.run.runner import RunResult

    why = {"blueprints": "skipped: GET /v2/blueprints/ answered 403 (refused for this route)"}
    ok = RunResult("a", 0, "ok")
    partial = RunResult("b", Exit.PARTIAL, "partial", unavailable=why, error=str(why))
    failed = RunResult("c", Exit.API, "failed", error="boom")
    assert exit_code({"a": ok, "b": partial}) == Exit.PARTIAL
    assert exit_code({"a": ok, "b": partial, "c": failed}) == Exit.API
    assert summary({"a": ok, "b": partial, "c": failed}).splitlines()[-1] == (
        "1 of 3 ok; partial: b; failed: c"
    )
    row = summary({"b": partial}).splitlines()[1]
    assert row.endswith("  skipped: blueprints") and "answered" not in row  # one short line


def test_the_loaded_run_statuses_are_those_of_the_loaded_exit_codes() -> None:
    """sql/vocabulary/run_statuses.csv (what moves the marts' "now" and a tenant's freshness)
    agrees with pipelines/exit_codes.py LOADED (what a scheduler counts as loaded)."""
    from esper_warehouse.pipelines.exit_codes import LOADED
    from esper_warehouse.sources.esper.vocabulary import loaded_run_statuses, run_statuses

    coded = {status: code for status, (_loaded, code) in run_statuses().items() if code is not None}
    assert {status for status, code in coded.items() if code in LOADED} == {"ok", "partial"}
    assert set(loaded_run_statuses()) == {"ok", "partial"}
    assert {
        "ok",
        "partial",
        "reconciliation_failed",
        "interrupted",
        "failed",
        "started",
        "locked",
    } == set(run_statuses())
