"""`esper-warehouse publish`: its options, then (pull and build, then) publish the marts to
Postgres (`publish.pull`, `models.build_models`, `publish.publish`), saying what failed.
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import duckdb

from ..build import models
from ..exit_codes import Exit
from ..views import publish
from ..warehouse import file_problem, path_problem
from . import Subcommand, add_lock_timeout, apply_options, shared_options


def main(argv: list[str] | None = None) -> int:
    """`esper-warehouse publish`: (pull and build, then) publish the marts to Postgres.

    Exit codes: as docs/reference/exit-codes.md says; the warehouse file's problems (held by another process,
    damaged, missing) as for `status`, before Postgres is asked anything.
    """
    parser = argparse.ArgumentParser(
        prog="esper-warehouse publish",
        description="Publish the marts to Postgres (schema marts); with --pull, first copy the "
        "raw tables loaded by `run --destination postgres` into a DuckDB compute file and build "
        "the models there. Credentials: DESTINATION__POSTGRES__CREDENTIALS. --warehouse: the "
        "warehouse to publish, or the compute file with --pull; --dataset: the Postgres schema "
        "of the raw tables.",
        parents=shared_options(),  # -v, --project-dir, --warehouse, --dataset (commands/__init__.py)
    )
    parser.add_argument("--pull", action="store_true", help="copy the raw tables from Postgres")
    parser.add_argument("--schema", default="marts", help="Postgres schema of the marts")
    add_lock_timeout(
        parser,
        "seconds to wait for sessions reading the marts, then fail naming them "
        f"(ESPER_WAREHOUSE__PUBLISH_LOCK_TIMEOUT_S, default {publish.DEFAULT_LOCK_TIMEOUT_S:g})",
    )
    args = parser.parse_args(argv)
    apply_options(args)
    started = time.perf_counter()
    problem = path_problem(args.warehouse) if args.pull else publish.unreadable(args.warehouse)
    if problem is not None:
        code, message = problem  # checked before Postgres is asked anything
        print(f"error: {message}; nothing was published", file=sys.stderr)
        return code
    try:
        pg = publish.connect()
        try:
            if args.pull:
                pulled = publish.pull(pg, args.dataset, args.warehouse)
                print(f"pulled {len(pulled)} raw tables ({sum(pulled.values()):,} rows)")
                built = models.build_models(args.warehouse)
                print(f"built {len(built)} models")
            timeout = args.lock_timeout
            counts = publish.publish(
                args.warehouse,
                pg,
                schema=args.schema,
                lock_timeout_s=timeout if timeout is not None else publish.lock_timeout_default(),
            )
        finally:
            pg.close()
    except publish.PublishLocked as error:
        print(f"error: {error}", file=sys.stderr)
        return Exit.LOCKED
    except (publish.PublishError, duckdb.Error) as error:
        if (problem := file_problem(args.warehouse, error)) is not None:
            print(f"error: {problem[1]}; nothing was published", file=sys.stderr)
            return problem[0]
        print(f"error: {error}", file=sys.stderr)
        return Exit.CONFIG if isinstance(error, publish.PublishError) else Exit.FAILED
    except Exception as error:  # the driver's errors: type and message, never the DSN
        if publish.connection_lost(error) and publish.connection_lost(error.__context__ or error):
            error = error.__context__ or error  # the loss itself, not the rollback after it
        text = f"{type(error).__name__}: {str(error).strip()}"
        if publish.connection_lost(error):  # Postgres down mid-transaction: as at connect
            print(f"error: lost the connection to Postgres: {text}; nothing was published "
                  "(the transaction is rolled back)", file=sys.stderr)  # fmt: skip
            return Exit.CONFIG
        print(f"error: {text}", file=sys.stderr)
        return Exit.FAILED
    buffer = io.StringIO()
    for mart, rows in counts.items():
        print(f"  {args.schema}.{mart:<28} {rows:>10,}", file=buffer)
    print(buffer.getvalue(), end="")
    print(f"published {len(counts)} marts in {time.perf_counter() - started:.2f} s")
    return Exit.OK


SUBCOMMAND = Subcommand("publish the marts to Postgres (pipelines.views.publish)", main=main)
