"""`esper-warehouse doctor`: its options; the probe itself is pipelines/doctor.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from .command import Subcommand, config_options
from .doctor import main


def _arguments(doctor: argparse.ArgumentParser) -> None:
    doctor.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the report as JSON to this file"
    )
    doctor.add_argument(
        "--data-tap",
        nargs="?",
        const="select 1 as one",
        metavar="SQL",
        help="also submit one Data Tap query (default: select 1 as one) and read its status",
    )


def _command(args: argparse.Namespace) -> int:
    return main(json_path=args.json, data_tap_sql=args.data_tap)


SUBCOMMAND = Subcommand(
    "read-only probe of the tenant's answers against what the source expects "
    "(exit 3: a shape that would break a run; 6: a run would be partial)",
    run=_command,
    parents=lambda: [config_options()],
    arguments=_arguments,
)
