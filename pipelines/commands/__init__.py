"""The subcommands of `esper-warehouse`: their table, what each declares, the options they share.

One module per subcommand, named after its word (`commands/run.py` is `esper-warehouse run`),
holds its options and its body, and declares ``SUBCOMMAND = Subcommand(...)``: its help line, the
parent parsers of its shared options, how it adds its own arguments and the function that runs
it. The body calls into the library (`run/runner.py`, `status.py`, `models.py` ...) for the work.
``SUBCOMMANDS`` below lists the words; ``cli.py`` imports only the module of the one asked for,
parses and runs it. Nothing here imports a subcommand's module at import time, and no module
below the command line imports ``cli`` (tests/test_import_graph.py).

A subcommand with ``main`` instead of ``run`` parses its own options (``models``, ``report``,
``publish``, ``simulate``), taking the shared options as parents from here. Every subcommand
runs as ``esper-warehouse <word>`` or ``python -m esper_warehouse.pipelines.cli <word>``; no
library module hands over to its command (a ``__main__`` block importing upwards breaks the
layers of tests/test_import_graph.py).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# One default warehouse file and dataset for every subcommand (`demo`'s own file:
# warehouse.py's `DEMO_WAREHOUSE`, which `status` reads too).
DEFAULT_WAREHOUSE = Path("esper_warehouse.duckdb")
DEFAULT_DATASET = "esper"
PROJECT_DIR_ENV = "DLT_PROJECT_DIR"  # dlt reads .dlt/config.toml and secrets.toml from there

# The words after `esper-warehouse`, in the order `--help` lists them; each is the module of this
# folder that declares it. Only the module of the subcommand asked for is imported, the way pip
# loads its commands: `run`, `demo`, `models` and `publish` import dlt and the source (~1.2 s);
# `status` and `report`, read every morning, start in ~0.2 s. `esper-warehouse --help` imports
# them all to list them.
SUBCOMMANDS: tuple[str, ...] = (
    "run",
    "status",
    "changes",
    "demo",
    "doctor",
    "simulate",
    "models",
    "report",
    "publish",
)


# Where the one redaction lives (`redact`): looked up, never imported here (it loads dlt).
_REDACTION_MODULE = "esper_warehouse.sources.esper.http.errors"


class RedactingFormatter(logging.Formatter):
    """Every line written, traceback included, with the process's API keys taken out.

    The source's `errors.redact` is looked up among the loaded modules: until a client is built
    it is not loaded and the process knows no key (so `status` still starts without dlt).
    """

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        errors = sys.modules.get(_REDACTION_MODULE)
        return errors.redact(text) if errors is not None else text


def _setup_logging(verbose: bool) -> None:
    level = logging.DEBUG if verbose or os.environ.get("ESPER_WAREHOUSE__DEBUG") else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, force=True)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        for noisy in ("httpx", "httpcore", "dlt"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def config_options() -> argparse.ArgumentParser:
    """`-v/--verbose` and `--project-dir`: a parent parser for every subcommand."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
    )
    parser.add_argument(
        "--project-dir",
        type=Path,
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="folder whose .dlt/config.toml and .dlt/secrets.toml are read "
        "(default: the current folder)",
    )
    return parser


def warehouse_options(
    default: Path = DEFAULT_WAREHOUSE, *, dataset: bool = True
) -> argparse.ArgumentParser:
    """`--warehouse` (and `--dataset`): a parent parser for the subcommands that open a warehouse."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--warehouse", type=Path, default=default, help=f"DuckDB file (default: {default})"
    )
    if dataset:
        parser.add_argument(
            "--dataset",
            default=DEFAULT_DATASET,
            help=f"schema of the raw tables (default: {DEFAULT_DATASET})",
        )
    return parser


def shared_options(*, dataset: bool = True) -> list[argparse.ArgumentParser]:
    """The parents of a subcommand that acts on the warehouse: config, `--warehouse`, `--dataset`."""
    return [config_options(), warehouse_options(dataset=dataset)]


def add_lock_timeout(parser: argparse.ArgumentParser, help: str) -> None:
    """`--lock-timeout SECONDS` (None when not given: the command falls back on its setting)."""
    parser.add_argument("--lock-timeout", type=float, default=None, help=help)


def apply_options(args: argparse.Namespace) -> None:
    """Act on the shared options once parsed: dlt's project folder, then logging."""
    project_dir = getattr(args, "project_dir", None)
    if project_dir is not None:
        os.environ[PROJECT_DIR_ENV] = str(Path(project_dir).expanduser().resolve())
    _setup_logging(bool(getattr(args, "verbose", False)))


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A subcommand with only the shared options."""


def subcommand(name: str) -> Subcommand:
    """The `SUBCOMMAND` that `commands/<name>.py` declares (its module imported now)."""
    if name not in SUBCOMMANDS:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{name}").SUBCOMMAND


@dataclass(frozen=True)
class Subcommand:
    """One subcommand: `cli.build_parser` adds it under its word (`SUBCOMMANDS`), `cli.main`
    runs it.

    Attributes:
        help: its line in `esper-warehouse --help`.
        run: runs it with the parsed options (the shared ones already applied); its exit code.
        parents: the shared options it takes (parent parsers, built afresh for each parser).
        arguments: adds its own arguments to its parser.
        main: set instead of `run` by a subcommand that parses its own options: called with the
            words after its name (and the options given before it, when `leading` is true).
        leading: `esper-warehouse -v models` passes `-v` on to `main`.
    """

    help: str
    run: Callable[[argparse.Namespace], int] | None = None
    parents: Callable[[], list[argparse.ArgumentParser]] = shared_options
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    main: Callable[[Sequence[str]], int | None] | None = None
    leading: bool = True

    def __post_init__(self) -> None:
        if (self.run is None) == (self.main is None):
            raise ValueError(f"subcommand {self.help!r}: give `run` or `main`, not both")
