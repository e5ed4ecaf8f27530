"""`esper-warehouse`: the entry point. Parse, run the subcommand asked for, exit.

The subcommands are pipelines/commands/ (its ``SUBCOMMANDS``: one module per word, each with
its options and its body); only the one asked for is imported. Exit codes:
pipelines/exit_codes.py (`--help` lists them).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .commands import SUBCOMMANDS, Subcommand, apply_options, subcommand
from .exit_codes import Exit, brief
from .readable import Visible


def build_parser(commands: Mapping[str, Subcommand] | None = None) -> argparse.ArgumentParser:
    """The parser of `commands` (default: every subcommand, each module imported)."""
    if commands is None:
        commands = {name: subcommand(name) for name in SUBCOMMANDS}
    parser = argparse.ArgumentParser(
        prog="esper-warehouse",
        description="Load an Esper tenant into a local DuckDB warehouse.",
        epilog=brief(),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "--project-dir", type=Path, metavar="DIR", help="folder holding .dlt/ (default: .)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in commands.items():
        if command.main is not None:  # parses its own options: main() hands it the words
            own = sub.add_parser(name, help=command.help, add_help=False)
            own.add_argument("rest", nargs=argparse.REMAINDER)
        else:
            command.arguments(sub.add_parser(name, help=command.help, parents=command.parents()))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand `argv` names, its output and log lines written through `Visible`:
    every text a command prints may quote the API, and none may act on the terminal."""
    shown = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Visible(shown[0]), Visible(shown[1])
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = shown


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    index = _command_index(argv)
    name = argv[index] if index is not None else None
    if name not in SUBCOMMANDS:  # no subcommand, `--help` or a misspelt one: argparse explains
        build_parser().parse_args(argv)  # and exits: 0 for `--help`, 2 for the others
        return Exit.CONFIG  # not reached
    assert index is not None
    command = subcommand(name)
    # Sub-commands that parse their own arguments (the shared options among them) get the words
    # after their name; options given before it (`esper-warehouse -v models`) are passed on.
    if command.main is not None:
        leading = argv[:index] if command.leading else []
        return int(command.main(leading + argv[index + 1 :]) or 0)
    args = build_parser({name: command}).parse_args(argv)
    apply_options(args)
    run = command.run
    assert run is not None  # a subcommand without `run` has `main`, handled above
    return run(args)


def _command_index(argv: list[str]) -> int | None:
    """Where the subcommand is: the first word that is neither an option nor an option's value."""
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--project-dir":
            skip = True
        elif not arg.startswith("-"):
            return i
    return None


def entry() -> None:
    """The `esper-warehouse` command: `main`, then a quick interpreter exit.

    Every object still alive is frozen out of the cyclic garbage collector first: the collection
    Python runs at shutdown otherwise walks the modules dlt and its dependencies import, a
    noticeable part of every short command (docs/decisions.md, "The CLI freezes the garbage
    collector"). Nothing is left to clean up by then: the run closed the warehouse, its files
    and its HTTP client, and atexit handlers (log flushing) still run.

    Output piped into a reader that stops early (`status | head`) ends with exit 141, as a shell
    reports a command SIGPIPE stopped, and no traceback. SIGPIPE itself stays ignored (Python's
    default): a nightly run whose log reader dies must still finish and record itself.
    """
    try:
        code = main()
        sys.stdout.flush()  # a reader gone away shows here when the output is buffered (a pipe)
    except BrokenPipeError:
        # `status | head`: the reader has what it wanted. No traceback; stdout goes to /dev/null
        # so that Python's own flush at exit does not fail (and print another) either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = Exit.OUTPUT_CLOSED
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
