"""`esper-warehouse run`: the nightly job's options, then one run (run/runner.py) or the tenants'."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..exit_codes import Exit
from ..jobs.tenants import main as run_tenants
from ..run.failures import toml_problem
from ..run.pipeline import load_memory_limit_default, lock_timeout_default
from ..run.runner import RunSettings, run, summary
from ..views import notify
from . import Subcommand, add_lock_timeout


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resources", help="comma-separated tables to load (default: all)")
    parser.add_argument("--full", action="store_true", help="full scans (marks removed devices)")
    parser.add_argument("--destination", default="duckdb", help="dlt destination (default: duckdb)")
    add_lock_timeout(
        parser,
        "seconds to wait for a warehouse held by another process "
        "(ESPER_WAREHOUSE__LOCK_TIMEOUT_S, default 300)",
    )
    parser.add_argument("--no-models", action="store_true", help="skip building the SQL models")
    parser.add_argument(
        "--notify",
        action="append",
        metavar="URL",
        help="an Apprise URL told the night's outcome and changes (repeatable; default: the "
        "setting notify_urls, ESPER_WAREHOUSE__NOTIFY_URLS)",
    )
    tenants = parser.add_mutually_exclusive_group()
    tenants.add_argument(
        "--tenant", action="append", help="a tenant of the tenants file (repeatable)"
    )
    tenants.add_argument(
        "--all-tenants", action="store_true", help="every tenant, then the fleet file"
    )
    parser.add_argument(
        "--tenants-file", type=Path, help="default: tenants.toml (pipelines/jobs/tenants.py)"
    )


def _command(args: argparse.Namespace) -> int:
    try:
        lock_timeout = (
            args.lock_timeout if args.lock_timeout is not None else lock_timeout_default()
        )
    except Exception as error:  # a .dlt/*.toml dlt cannot read, or a timeout that is no number
        problem = toml_problem(error) or f"ESPER_WAREHOUSE__LOCK_TIMEOUT_S: {error}"
        print(f"error: {problem}", file=sys.stderr)
        return Exit.CONFIG
    try:
        urls = args.notify or notify.notify_urls_default()
    except Exception as error:
        problem = toml_problem(error) or f"{notify.NOTIFY_ENV}: {error}"
        print(f"error: {problem}", file=sys.stderr)
        return Exit.CONFIG
    settings = RunSettings(
        warehouse=args.warehouse,
        destination=args.destination,
        dataset=args.dataset,
        resources=[r.strip() for r in args.resources.split(",") if r.strip()]
        if args.resources
        else None,
        full=args.full,
        lock_timeout_s=lock_timeout,
        load_memory_limit=load_memory_limit_default(),
        build_models=not args.no_models,
    )
    if args.tenant or args.all_tenants:
        return run_tenants(settings, args.tenant, args.tenants_file)
    result = run(settings)
    print(summary(result), file=sys.stdout)
    # after the run is committed; whatever the message meets, the exit code is the run's
    notify.send(urls, result, settings.warehouse)
    return result.exit_code


SUBCOMMAND = Subcommand(
    "the nightly job: load, reconcile, build the models",
    run=_command,
    arguments=_arguments,
)
