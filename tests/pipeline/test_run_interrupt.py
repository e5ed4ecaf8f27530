"""Ctrl-C during a run: a clean stop that says so, exit 130, nothing retried; the next run completes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from esper_warehouse.pipelines.exit_codes import Exit

from .helpers import cli, compare, reading, rows


def test_ctrl_c_during_extraction_stops_cleanly_and_the_next_run_completes(
    sim, tmp_path: Path
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([{"kind": "latency", "ms": 300}])  # every answer slow: extraction lasts
    process = cli(sim, wh, "run")
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "extract: started" in line:
            break
    time.sleep(0.5)  # requests in flight, device fan-outs under way
    process.send_signal(signal.SIGINT)
    stopped = time.monotonic()
    out, err = process.communicate(timeout=30)
    err = "".join(seen) + err
    assert time.monotonic() - stopped < 5, "the run did not stop promptly"
    assert process.returncode == Exit.INTERRUPTED == 130, err[-3000:]
    assert "interrupted" in out and "the next run" in out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "retry" not in err.lower() and "Bad file descriptor" not in err
    assert rows(wh, "_esper_runs", ("status",)) == [("interrupted",)]

    sim.clear_faults()
    # the interrupted run was the whole tenant's; this one loads the compared tables
    compared = ("devices", "device_events", "command_statuses", "device_apps")
    again = cli(sim, wh, "run", "--resources", ",".join(compared))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err[-3000:]
    with reading(wh):
        for table in compared:
            compare(sim, wh, table)
