"""The reference pages' generated sections, each written from its one home.

* docs/reference/exit-codes.md `exit-codes`: one row per code of `Exit`, with its `MEANING`;
* docs/reference/cli.md `cli`: `esper-warehouse --help` and each subcommand's `--help`, as the
  parsers print them (pipelines/commands/, and simulator/cli.py for `simulate`);
* docs/reference/marts.md `marts`: sql/marts/_marts.yml (`mart_docs.reference`).

`table_docs` writes and checks them with the raw tables' sections (its `SECTIONS`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from .exit_codes import MEANING, Exit

# The width the help is wrapped at, whatever terminal writes the page.
HELP_COLUMNS = "100"


def exit_codes_table() -> str:
    """One row per exit code, its meaning in full."""
    rows = ["| exit code | meaning |", "|---|---|"]
    rows += [f"| {int(code)} | {_escaped(MEANING[code])} |" for code in Exit]
    return "\n".join(rows)


def _escaped(text: str) -> str:
    """A `|` in a markdown cell would split it."""
    return text.replace("|", "\\|")


def help_text(words: list[str]) -> str:
    """What `esper-warehouse <words> --help` prints, run as a user runs it (a process of its own:
    nothing below the command line imports it), wrapped at `HELP_COLUMNS` and without colour."""
    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", f"{__package__}.cli", *words, "--help"],
        capture_output=True, text=True, env=env, check=True, timeout=120,
    )  # fmt: skip
    return done.stdout.rstrip()


def cli_reference() -> str:
    """`esper-warehouse --help`, then every subcommand's, in `SUBCOMMANDS` order."""
    from .commands import SUBCOMMANDS

    with ThreadPoolExecutor(max_workers=4) as pool:  # each process imports what its word needs
        helps = list(pool.map(help_text, [[], *([name] for name in SUBCOMMANDS)]))
    parts = ["## esper-warehouse", "", "```text", helps[0], "```"]
    for name, text in zip(SUBCOMMANDS, helps[1:], strict=True):
        parts += ["", f"## esper-warehouse {name}", "", "```text", text, "```"]
    return "\n".join(parts)


def marts_reference() -> str:
    """The marts, from sql/marts/_marts.yml."""
    from .mart_docs import reference

    return reference()
