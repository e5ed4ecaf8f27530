"""`esper-warehouse simulate`: the Esper API simulator, whose own parser (simulator/cli.py) reads
the words after `simulate` (options given before it are not passed on)."""

from __future__ import annotations

from collections.abc import Sequence

from esper_warehouse.simulator import cli

from . import Subcommand


def _main(argv: Sequence[str]) -> int:
    return cli.main(list(argv))


SUBCOMMAND = Subcommand("run the Esper API simulator (simulator.cli)", main=_main, leading=False)
