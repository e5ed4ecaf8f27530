"""`esper-warehouse report`: its options, then every notebook exported (`report.export_all`) and,
with ``--charts``, the README's charts written (`report.write_charts`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .. import extras
from ..exit_codes import Exit
from ..views import report
from ..views.status import missing_message
from ..warehouse import locked_message
from . import Subcommand, apply_options, shared_options


def main(argv: list[str] | None = None) -> int:
    """`esper-warehouse report`. Exit codes: 0 every page rendered; 1 a cell failed or a page
    says the warehouse cannot be read; 2 no such warehouse file, or one that is not a DuckDB
    warehouse or is damaged; 5 the warehouse was held by another process (before or while
    exporting)."""
    parser = argparse.ArgumentParser(
        prog="esper-warehouse report",
        description="Export every notebook to HTML (and the README charts to PNG).",
        parents=shared_options(dataset=False),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("report"),
        help="folder for the HTML pages (default: report/)",
    )
    parser.add_argument(
        "--charts",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the README charts as PNG files into DIR (docs/img)",
    )
    parser.add_argument(
        "--include-code", action="store_true", help="show the notebooks' code in the HTML pages"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="notebooks exported at once (default: number of CPUs)",
    )
    args = parser.parse_args(argv)
    apply_options(args)

    if (lacking := extras.needs("the report")) is not None:
        print(f"report: error: {lacking}", file=sys.stderr)
        return Exit.CONFIG
    warehouse = args.warehouse.expanduser().resolve()
    if not warehouse.exists():
        print(f"report: error: {missing_message(args.warehouse)}", file=sys.stderr)
        return Exit.CONFIG
    if (problem := report.unreadable(warehouse)) is not None:
        code, message = problem
        print(f"report: error: {message}; no page was written", file=sys.stderr)
        return code

    for folder, option in ((args.out, "--out"), (args.charts, "--charts")):
        if folder is not None and (refused := _unwritable(folder, option)) is not None:
            print(f"report: error: {refused}; no page was written", file=sys.stderr)
            return Exit.CONFIG
    print(
        f"report: exporting {len(report.notebooks())} notebooks from {warehouse} into {args.out}/"
    )
    exports = report.export_all(warehouse, args.out, include_code=args.include_code, jobs=args.jobs)
    for e in exports:
        state = "ok" if e.ok else "BUSY" if e.busy else "FAILED"
        print(f"  {state:6} {e.html}  ({e.seconds:.1f} s)")
        if not e.ok and not e.busy:
            print(e.errors.rstrip(), file=sys.stderr)
    failed = [e for e in exports if not e.ok]

    if args.charts is not None and not failed:
        print(f"report: writing charts into {args.charts}/")
        for path in report.write_charts(warehouse, args.charts):
            print(f"  {path}")

    busy = [e for e in failed if e.busy]
    if busy:
        names = ", ".join(e.notebook.name for e in busy)
        print(f"report: error: {locked_message(warehouse)} ({names})", file=sys.stderr)
        return Exit.LOCKED
    if failed:
        names = ", ".join(e.notebook.name for e in failed)
        modules = sorted({m for e in failed for m in report.NO_MODULE.findall(e.errors)})
        cause = f" (No module named {', '.join(map(repr, modules))})" if modules else ""
        print(f"report: cells failed in {names}{cause}", file=sys.stderr)
        return Exit.FAILED
    print(f"report: open {(args.out / 'index.html').resolve()}")
    return Exit.OK


def _unwritable(folder: Path, option: str) -> str | None:
    """Why the report cannot write into `folder` (made when missing), tried by writing there:
    the operating system's own answer, not a guess from permissions; None when it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        said = error.strerror or type(error).__name__
        return (
            f"{folder} cannot be written ({said}): pass {option} with a folder this user may write"
        )
    return None


SUBCOMMAND = Subcommand("write the report (pipelines.views.report)", main=main)
