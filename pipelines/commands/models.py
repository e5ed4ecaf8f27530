"""`esper-warehouse models`: its options, then the build (`models.build_models`) and what it built."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb

from ..build import models
from ..build.model_files import ModelError, SeedsMissing
from ..exit_codes import Exit
from ..views.status import missing_message, open_failure
from ..warehouse import file_problem, path_problem
from . import Subcommand, apply_options, shared_options


def main(argv: list[str] | None = None) -> int:
    """`esper-warehouse models`: build the models and print how many of each layer were built
    (and, with `-v`, each one's name).

    Exit codes: 0 built; 1 a model or data test failed, or the disk is full (nothing changed);
    2 no such warehouse file (unless --create), one that is not a DuckDB warehouse or is
    damaged, a folder that cannot be written, or no seeds folder; 4 a first load is unfinished
    (nothing built); 5 the file is held by another process.
    """
    parser = argparse.ArgumentParser(
        prog="esper-warehouse models",
        description=models.__doc__.split("\n")[0],
        epilog="-v also lists every relation built",
        parents=shared_options(),
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="build into a new, empty warehouse file when there is none (default: exit 2)",
    )
    args = parser.parse_args(argv)
    apply_options(args)
    warehouse: Path = args.warehouse
    if not warehouse.exists() and not args.create:
        create = "" if path_problem(warehouse) else " (or pass --create)"
        print(f"error: {missing_message(warehouse)}{create}", file=sys.stderr)
        return Exit.CONFIG
    if warehouse.exists() and (unfinished := models.unfinished_load(warehouse, args.dataset)):
        print(f"error: {unfinished}; no model was built from part of the fleet", file=sys.stderr)
        return Exit.UNFINISHED
    started = time.perf_counter()
    try:
        built = models.build_models(warehouse, dataset=args.dataset)
    except SeedsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.CONFIG
    except (ModelError, duckdb.Error) as exc:  # the file's problem (full disk ...) comes first
        problem = file_problem(warehouse, exc)
        if problem is None and isinstance(exc, ModelError):
            problem = Exit.FAILED, str(exc)
        code, message = problem or open_failure(warehouse, exc)
        print(f"error: {message}", file=sys.stderr)
        return code
    if getattr(args, "verbose", False):
        for relation in built:
            print(relation)
    print(
        f"built {len(built)} relations ({layer_counts(built)}) in "
        f"{time.perf_counter() - started:.2f} s into {warehouse}"
        + ("" if getattr(args, "verbose", False) or not built else "; -v lists them")
    )
    return Exit.OK


def layer_counts(built: list[str]) -> str:
    """``14 seeds, 40 staging, 23 intermediate, 14 marts``: relations per schema, in build order."""
    counts = Counter(name.split(".", 1)[0] for name in built)
    order = [*models.SCHEMAS, *sorted(set(counts) - set(models.SCHEMAS))]
    return ", ".join(f"{counts[schema]} {schema}" for schema in order if counts[schema])


SUBCOMMAND = Subcommand("build the SQL models (pipelines.build.models)", main=main)
