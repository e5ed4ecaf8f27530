"""The reference pages' generated sections, each written from its one home.

* docs/reference/exit-codes.md `exit-codes`: one row per code of `Exit`, with its `MEANING`;
* docs/reference/cli.md `cli`: `esper-warehouse --help` and each subcommand's `--help`, as the
  parsers print them (pipelines/commands/, and simulator/cli.py for `simulate`);
* docs/reference/marts.md `marts`: sql/marts/_marts.yml (`mart_docs.reference`).

`table_docs` writes and checks them with the raw tables' sections (its `SECTIONS`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache

from ..exit_codes import MEANING, Exit

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


# Run in a process of its own: the command line sits on top of every module, and none below it
# imports it (tests/test_import_graph.py). One process prints every help (`esper-warehouse
# --help` imports every subcommand anyway), as `esper-warehouse <word> --help` prints it.
_PRINT_HELP = """
import contextlib, io, json, sys
from esper_warehouse.pipelines.cli import main
helps = []
for words in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    helps.append(out.getvalue().rstrip())
print(json.dumps(helps))
"""


def help_texts(commands: list[list[str]]) -> list[str]:
    """What `esper-warehouse <words> --help` prints for each of `commands`, wrapped at
    `HELP_COLUMNS` and without colour."""
    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PRINT_HELP, json.dumps(commands)],
        capture_output=True, text=True, env=env, check=True, timeout=300,
    )  # fmt: skip
    return json.loads(done.stdout)


@cache
def cli_reference() -> str:
    """`esper-warehouse --help`, then every subcommand's, in `SUBCOMMANDS` order (once per
    process: the parsers do not change while it runs)."""
    from ..commands import SUBCOMMANDS

    helps = help_texts([[], *([name] for name in SUBCOMMANDS)])
    parts = ["## esper-warehouse", "", "```text", helps[0], "```"]
    for name, text in zip(SUBCOMMANDS, helps[1:], strict=True):
        parts += ["", f"## esper-warehouse {name}", "", "```text", text, "```"]
    return "\n".join(parts)


def marts_reference() -> str:
    """The marts, from sql/marts/_marts.yml."""
    from .mart_docs import reference

    return reference()
