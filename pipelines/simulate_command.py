"""`esper-warehouse simulate`: the Esper API simulator, whose own parser (simulator/cli.py) reads
the words after `simulate` (options given before it are not passed on)."""

from __future__ import annotations

from collections.abc import Sequence

from .command import Subcommand


def _main(argv: Sequence[str]) -> int:
    # The simulator's server takes ~0.3 s to import; `esper-warehouse` imports this module for
    # every subcommand (to list `simulate`), so only `simulate` pays for it.
    from esper_warehouse.simulator import cli

    return cli.main(list(argv))


SUBCOMMAND = Subcommand(
    "simulate", "run the Esper API simulator (simulator.cli)", main=_main, leading=False
)
