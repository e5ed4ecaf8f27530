"""`esper-warehouse status`: the shared options; the report itself is `status.status`."""

from __future__ import annotations

import argparse

from ..views.status import status
from . import Subcommand


def _command(args: argparse.Namespace) -> int:
    return status(args.warehouse, args.dataset)


SUBCOMMAND = Subcommand("last runs, table freshness, reconciliation", run=_command)
