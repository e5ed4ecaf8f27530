"""`esper-warehouse changes`: what changed overnight (marts.fleet_changes), every row of the
nights asked for, in the words of sql/vocabulary/change_kinds.csv."""

from __future__ import annotations

import argparse
import sys
from datetime import date

import duckdb
import orjson

from ..exit_codes import Exit
from ..views import digest
from ..views.status import missing_message, open_failure
from . import Subcommand


def _arguments(parser: argparse.ArgumentParser) -> None:
    window = parser.add_mutually_exclusive_group()
    window.add_argument(
        "--since", type=date.fromisoformat, metavar="DATE", help="nights found on or after DATE"
    )
    window.add_argument("--nights", type=int, metavar="N", help="the last N nights (default 1)")
    parser.add_argument("--json", action="store_true", help="the digest and every row, as JSON")


def _command(args: argparse.Namespace) -> int:
    if not args.warehouse.exists():
        print(f"error: {missing_message(args.warehouse)}", file=sys.stderr)
        return Exit.CONFIG
    try:
        con = duckdb.connect(str(args.warehouse), read_only=True)
    except duckdb.Error as error:
        code, message = open_failure(args.warehouse, error)
        print(f"error: {message}", file=sys.stderr)
        return code
    try:
        if not digest.has_mart(con):
            print(
                "error: no marts.fleet_changes: build the models (esper-warehouse models)",
                file=sys.stderr,
            )
            return Exit.CONFIG
        found = digest.read(con, since=args.since, nights=args.nights, first=1_000_000)
        every = digest.rows(con, since=args.since, nights=args.nights)
        words = digest.not_compared_label(con)
    finally:
        con.close()
    if args.json:
        sys.stdout.write(orjson.dumps(digest.as_json(found, every)).decode() + "\n")
        return Exit.OK
    print("\n".join(digest.lines(found, words, shown=0)))
    for row in every:
        if row["change"] == "not_compared":
            continue
        change = f"{row['before'] or '–'} -> {row['after'] or '–'}"
        why = f"  ({digest.terminal(row['reason'])})" if row["reason"] else ""
        print(
            f"  {row['as_of'][:16]}  {row['change_label']:<24} "
            f"{digest.terminal(row['subject_name'] or row['subject_id'])}  {change}{why}"
        )
    return Exit.OK


SUBCOMMAND = Subcommand(
    "what changed overnight (marts.fleet_changes)", run=_command, arguments=_arguments
)
