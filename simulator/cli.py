"""``esper-warehouse simulate``: serve a simulated tenant in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import threading

from esper_warehouse.simulator.core import MAX_DEVICES, MIN_DEVICES, Simulator
from esper_warehouse.simulator.people import SCENARIOS


def build_parser() -> argparse.ArgumentParser:
    """The ``simulate`` argument parser."""
    p = argparse.ArgumentParser(prog="esper-warehouse simulate", description=__doc__)
    p.add_argument(
        "--devices", type=int, default=200, help=f"fleet size ({MIN_DEVICES}..{MAX_DEVICES})"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    p.add_argument("--api-key", default="test-key")
    p.add_argument("--enterprise-id", default="5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f")
    p.add_argument("--latency-ms", type=float, default=0)
    p.add_argument("--rate-limit", type=float, default=None, help="requests/second (429 beyond)")
    p.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default=None,
        help="a named scenario (default: a coherent tenant)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the simulator in the foreground; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        sim = Simulator(
            devices=args.devices,
            seed=args.seed,
            api_key=args.api_key,
            enterprise_id=args.enterprise_id,
            latency_ms=args.latency_ms,
            rate_limit=args.rate_limit,
            port=args.port,
            scenario=args.scenario,
        )
    except ValueError as e:
        print(f"error: {e}")
        return 2
    stop = threading.Event()
    # Ctrl-C and SIGTERM only set the event: a KeyboardInterrupt raised at a random point (while
    # the server is still starting, or inside a print) could leave the process hanging on exit.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with sim:
        print(f"Esper API simulator serving {args.devices} devices at {sim.base_url}", flush=True)
        print(
            f"  enterprise id {sim.enterprise_id}; control routes under {sim.base_url[:-4]}/_sim/"
        )
        print("  Ctrl-C to stop", flush=True)
        while not stop.wait(0.5):
            pass
    print("stopped", flush=True)
    return 0
