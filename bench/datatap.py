"""What one Data Tap query costs in requests: `python -m bench.datatap [--job-seconds 40]`.

The tenant's Data Tap quota counts submissions and polls alike (live-observations section 18:
Esper's own client budgets 25 requests an hour). A query whose job runs `--job-seconds` on the
simulator (wall-clock time) is run through the source's `run_query` with the default poll
schedule (10, 20, then every 30 s) and with the schedule the source used before (0.25 s,
doubling); the simulator counts the requests each cost.
"""

from __future__ import annotations

import argparse
import time

from esper_warehouse.sources.esper.http import EsperClient
from esper_warehouse.sources.esper.settings import EsperSourceConfiguration as Settings
from esper_warehouse.sources.esper.tables.data_tap_jobs import RequestBudget, run_query

API_KEY = "bench-datatap-key-0123456789"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
BEFORE = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)  # the earlier schedule: 0.25 s, doubling


def cost(job_seconds: float, poll_s: tuple[float, ...]) -> tuple[int, float]:
    """(requests, seconds) of one query whose job runs `job_seconds`."""
    from esper_warehouse.simulator import Simulator

    with Simulator(devices=50, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        sim.world.datatap.job_seconds = job_seconds
        sim.reset_stats()
        started = time.monotonic()
        with EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID) as client:
            run_query(
                client, "bench", "select 1 as one", deadline_s=3600, stuck_s=3600,
                row_limit=10, poll_s=poll_s, budget=RequestBudget(1000),
            )  # fmt: skip
        seconds = time.monotonic() - started
        requests = sum(n for r, n in sim.stats()["routes"].items() if "/data-tap/" in r)
    return requests, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.datatap", description=__doc__)
    parser.add_argument("--job-seconds", type=float, default=40)
    args = parser.parse_args(argv)
    print("| poll schedule | job | requests (submission + polls) | result seen after |")
    print("|---|---|---|---|")
    for label, schedule in (("10, 20, then every 30 s (now)", Settings.data_tap_poll_s),
                            ("0.25 s, doubling (before)", BEFORE)):  # fmt: skip
        requests, seconds = cost(args.job_seconds, schedule)
        print(f"| {label} | {args.job_seconds:g} s | {requests} | {seconds:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
