"""A run killed at any instant of its load leaves no duplicate row, and the next run completes it.

The kills are deterministic: the run is a real `esper-warehouse run` subprocess whose dlt load
SIGKILLs its own process at an exact step (a job just started; the device events just committed
in DuckDB but not yet marked done in dlt's package). One more test kills a run by timing, as a
user's reboot would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import summary
from esper_warehouse.pipelines.warehouse import working_dir

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import ROOT, cli, compare, load, reading, rows

# Run the command line with dlt's package storage patched to kill the process at one step.
KILLER = """
import os, signal, sys
from dlt.common.storages.load_package import PackageStorage

at = sys.argv.pop(1)
if at == "first-job-start":
    start_job = PackageStorage.start_job
    def killing_start_job(self, load_id, file_name):
        start_job(self, load_id, file_name)
        os.kill(os.getpid(), signal.SIGKILL)
    PackageStorage.start_job = killing_start_job
elif at == "events-committed":
    save = PackageStorage.save_pending_transition
    def killing_save(self, load_id, file_name, *args, **kwargs):
        if file_name.startswith("device_events."):
            os.kill(os.getpid(), signal.SIGKILL)  # committed in DuckDB, not yet marked done
        return save(self, load_id, file_name, *args, **kwargs)
    PackageStorage.save_pending_transition = killing_save
from esper_warehouse.pipelines.cli import main
sys.exit(main(sys.argv[1:]))
"""


# What the runs here load: the tables they compare or count keys in, not the whole tenant
# ("Scenario tests load the tables they check", docs/decisions.md).
LOADED = ["devices", "device_events", "command_requests", "operations"]


def killed_run(sim, wh: Path, at: str) -> subprocess.CompletedProcess[str]:
    """`esper-warehouse run --resources LOADED` (no models), killing itself at the load step `at`."""
    env = {
        **os.environ,
        "SOURCES__ESPER__BASE_URL": sim.base_url,
        "SOURCES__ESPER__API_KEY": API_KEY,
        "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
        "ESPER_WAREHOUSE__LOCK_TIMEOUT_S": "3",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-c", KILLER, at, "run", "--warehouse", str(wh), "--no-models",
            "--resources", ",".join(LOADED)]  # fmt: skip
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def duplicates(wh: Path, table: str, key: str) -> int:
    with duckdb.connect(str(wh), read_only=True) as con:
        total, distinct = con.sql(
            f"select count(*), count(distinct ({key})) from esper.{table}"
        ).fetchone()  # type: ignore[misc]
    return total - distinct


def test_a_load_killed_twice_then_run_again_holds_each_event_once(sim, wh: Path) -> None:
    """The issue's scenario, at its worst instants: killed as the first load job starts, then
    the run that resumes that load killed right after DuckDB committed the device events."""
    first = killed_run(sim, wh, "first-job-start")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    second = killed_run(sim, wh, "events-committed")
    assert second.returncode == -signal.SIGKILL, second.stderr[-2000:]
    assert "pending" in second.stderr  # it resumed the first run's load before it died
    third = load(sim, wh, resources=LOADED)
    assert third.exit_code == 0, third.error
    assert duplicates(wh, "device_events", "id") == 0
    assert duplicates(wh, "device_history", "id, updated_at") == 0
    with reading(wh):
        for table in ("devices", "device_events", "command_requests", "operations"):
            compare(sim, wh, table)
    assert not any(r["table_name"] == "device_events" and not r["ok"] for r in third.reconciliation)


def test_a_full_run_reports_duplicate_keys_as_a_shortfall_not_ok(sim, wh: Path, first_load) -> None:
    """Reconciliation counts what the table holds: events stored twice (as a resumed append
    left them before this fix) fail `run --full` with exit 4, never "expected N loaded N ok"."""
    assert first_load(wh).exit_code == 0
    with duckdb.connect(str(wh)) as con:
        con.execute("insert into esper.device_events select * from esper.device_events limit 5")
    full = load(sim, wh, full=True, resources=["devices", "device_events"])
    assert full.exit_code == Exit.UNFINISHED, full.error
    assert "device_events (5 duplicate keys)" in (full.error or "")
    (events,) = [r for r in full.reconciliation if r["table_name"] == "device_events"]
    assert (events["missing"], events["duplicates"], events["ok"]) == (0, 5, False)
    assert events["loaded"] == events["expected"] == len(sim.truth("device_events"))
    events_rows = "where table_name = 'device_events' order by checked_at"
    stored = rows(wh, "_esper_reconciliation", ("duplicates", "ok"), events_rows)
    assert stored == [(0, True), (5, False)]
    assert "duplicate" in summary(full)


@pytest.mark.slow
def test_a_run_killed_by_timing_during_the_load_leaves_no_duplicates(sim, wh: Path) -> None:
    """A real SIGKILL within ~0.1 s of the device events' load job appearing, then a clean run."""
    process = cli(sim, wh, "run")
    started = working_dir(wh.resolve())
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        if any(started.rglob("started_jobs/device_events.*")):
            time.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    process.communicate()
    assert process.returncode == -signal.SIGKILL  # killed during the load, not finished
    again = load(sim, wh)
    assert again.exit_code == 0, again.error
    assert duplicates(wh, "device_events", "id") == 0
    compare(sim, wh, "device_events")
    assert rows(wh, "_esper_runs", ("status",), "where status = 'ok'") == [("ok",)]
