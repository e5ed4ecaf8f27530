"""Serve the simulator in a process of its own, so its memory and CPU are measured apart.

Usage: `python -m bench.simserver --devices N --seed S --enterprise-id E [--latency-ms X]
[--rate-limit R]` with the API key in the environment variable `BENCH_API_KEY` (never on the
command line). Prints `BASE_URL <url>` once serving, then blocks until stdin closes or a
SIGTERM/SIGINT arrives. Built on the documented Python interface (`docs/contracts.md` section 1);
the harness controls it over HTTP (`/_sim/...`) only.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    """Start the simulator on 127.0.0.1 and keep it up until told to stop."""
    parser = argparse.ArgumentParser(prog="python -m bench.simserver")
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--enterprise-id", required=True)
    parser.add_argument("--latency-ms", type=float, default=0)
    parser.add_argument("--rate-limit", type=float, default=None)
    args = parser.parse_args(argv)

    from esper_warehouse.simulator import Simulator

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def watch_stdin() -> None:
        """Stop when the parent closes our stdin (it died or is done)."""
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    with Simulator(
        devices=args.devices,
        seed=args.seed,
        api_key=os.environ["BENCH_API_KEY"],
        enterprise_id=args.enterprise_id,
        latency_ms=args.latency_ms,
        rate_limit=args.rate_limit,
    ) as sim:
        print(f"BASE_URL {sim.base_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
