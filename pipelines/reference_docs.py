"""The reference pages' generated sections, each written from its one home.

* docs/reference/exit-codes.md `exit-codes`: one row per code of `Exit`, with its `MEANING`;
* docs/reference/cli.md `cli`: `esper-warehouse --help` and each subcommand's `--help`, as the
  parsers print them (pipelines/commands/, and simulator/cli.py for `simulate`);
* docs/reference/marts.md `marts`: sql/marts/_marts.yml (`mart_docs.reference`).

`table_docs` writes and checks them with the raw tables' sections (its `SECTIONS`).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator

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


@contextlib.contextmanager
def _fixed_terminal() -> Iterator[None]:
    """argparse wraps at $COLUMNS: the same text on every machine (and no colour)."""
    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=HELP_COLUMNS, NO_COLOR="1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def help_text(words: list[str]) -> str:
    """What `esper-warehouse <words> --help` prints."""
    from .cli import main

    out = io.StringIO()
    with _fixed_terminal(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    return out.getvalue().rstrip()


def cli_reference() -> str:
    """`esper-warehouse --help`, then every subcommand's, in `SUBCOMMANDS` order."""
    from .commands import SUBCOMMANDS

    parts = ["## esper-warehouse", "", "```text", help_text([]), "```"]
    for name in SUBCOMMANDS:
        parts += ["", f"## esper-warehouse {name}", "", "```text", help_text([name]), "```"]
    return "\n".join(parts)


def marts_reference() -> str:
    """The marts, from sql/marts/_marts.yml."""
    from .mart_docs import reference

    return reference()
