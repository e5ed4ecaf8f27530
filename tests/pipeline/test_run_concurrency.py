"""Two runs on one warehouse at once: the second waits for the first, or says who holds it."""

from __future__ import annotations

import time
from pathlib import Path

from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.warehouse import run_lock_path

from .helpers import cli, compare, reading

# The three runs load the slowed heartbeats and the compared tables, not the whole tenant: who
# holds the warehouse does not depend on it ("Scenario tests load the tables they check",
# docs/decisions.md).
SELECTED = ("--resources", "devices,heartbeats,device_events,command_statuses")


def test_a_second_run_waits_for_the_first_or_names_it_after_the_deadline(
    sim, tmp_path: Path
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([{"kind": "slow", "route": "/v2/heartbeat/", "seconds": 5, "times": 1}])
    first = cli(sim, wh, "run", *SELECTED)
    lock = run_lock_path(wh)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and first.poll() is None:
        if lock.exists() and lock.read_text().strip() == str(first.pid):
            break  # the first run holds the lock (it is waiting on its slow heartbeat page)
        time.sleep(0.02)
    assert first.poll() is None, first.communicate()
    impatient = cli(sim, wh, "run", *SELECTED, env={"ESPER_WAREHOUSE__LOCK_TIMEOUT_S": "1"})
    patient = cli(sim, wh, "run", *SELECTED, env={"ESPER_WAREHOUSE__LOCK_TIMEOUT_S": "60"})

    out, err = impatient.communicate(timeout=60)
    assert impatient.returncode == Exit.LOCKED, err[-3000:]
    assert f"another run (pid {first.pid}) is in progress on {wh}" in out
    assert "Traceback" not in err
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err[-3000:]
    out, err = patient.communicate(timeout=60)
    assert patient.returncode == 0, err[-3000:]
    assert f"another run (pid {first.pid}) is in progress" in err  # it waited, then ran
    assert "LoadPackageNotFound" not in err and "FileNotFoundError" not in err
    sim.clear_faults()
    with reading(wh):
        for table in ("devices", "device_events", "command_statuses"):
            compare(sim, wh, table)
