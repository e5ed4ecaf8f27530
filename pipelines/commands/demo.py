"""`esper-warehouse demo`: its options; the demo itself is `demo.demo`."""

from __future__ import annotations

import argparse

from ..jobs.demo import demo
from ..warehouse import DEMO_WAREHOUSE
from . import Subcommand, config_options, warehouse_options


def _demo_options() -> list[argparse.ArgumentParser]:
    # The demo writes its own file (it refuses one it did not create), never the real warehouse.
    return [config_options(), warehouse_options(DEMO_WAREHOUSE, dataset=False)]


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--seed", type=int, default=7)


def _command(args: argparse.Namespace) -> int:
    return demo(args.warehouse, devices=args.devices, days=args.days, seed=args.seed)


SUBCOMMAND = Subcommand(
    "a simulated fleet, two weeks of nightly loads, models",
    run=_command,
    parents=_demo_options,
    arguments=_demo_arguments,
)
