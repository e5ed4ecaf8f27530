"""The nightly run: extract the Esper source, load it, reconcile, record the run, build the models.

Exit codes (also used by the command line):
    0 everything loaded and reconciled; 1 unexpected error; 2 auth or configuration error;
    3 API failure; 4 reconciliation shortfall; 5 warehouse locked; 6 partial (loaded and
    reconciled, but the API refused some tables or some devices' feeds: see `unavailable`);
    130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dlt
import orjson
from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from dlt.common.schema.utils import has_table_seen_data
from esper_warehouse.sources.esper import RunLedger, esper
from esper_warehouse.sources.esper.http import (
    EsperAuthError,
    EsperClient,
    EsperConfigError,
    EsperError,
    EsperNotFoundError,
)
from esper_warehouse.sources.esper.settings import SETTINGS, SettingError, check_settings
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.data_tap import table_name as data_tap_table

from . import bookkeeping
from .exit_codes import LOADED, Exit
from .ownership import check_owner
from .progress import Progress
from .reconcile import reconcile, remove_duplicate_keys, retire_missing_apps
from .warehouse import (
    WarehouseLocked,
    is_lock_error,
    run_lock,
    wait_for_file,
    with_lock_wait,
    working_dir,
)

log = logging.getLogger("esper_warehouse")

# Exit codes: pipelines/exit_codes.py is their home; the names below are the runner's words for them.
EXIT_OK, EXIT_UNEXPECTED, EXIT_CONFIG, EXIT_API = Exit.OK, Exit.FAILED, Exit.CONFIG, Exit.API
EXIT_RECONCILIATION, EXIT_LOCKED, EXIT_PARTIAL = Exit.UNFINISHED, Exit.LOCKED, Exit.PARTIAL
EXIT_INTERRUPTED = Exit.INTERRUPTED
# What an interruption leaves, by the step it stopped (the run's summary says it).
AFTER_INTERRUPT = {
    "start": "nothing was loaded; the next run starts afresh",
    "extract": "nothing of this run was loaded and no cursor moved; the next run reads it again",
    "normalize": "nothing of this run was loaded; the extracted data is kept pending and the "
    "next run loads it first",
    "load": "the load stopped part-way; the next run finishes it first (no row is doubled)",
    "after the load": "everything extracted was loaded; the next run checks it again",
    "between parts": "no part was in progress",
}
# Said instead of "this run" once parts of it are committed (sources/esper/walk.py).
IN_PROGRESS = "the part in progress"
KEPT = ": the next run goes on from them"  # said of committed parts (sources/esper/walk.py)
PIPELINE_NAME = "esper_warehouse"
# Resources that come with another (`Endpoint.loaded_with`): selecting `devices` loads its
# history and census too.
COMPANIONS: dict[str, tuple[str, ...]] = {
    parent: tuple(t for t, e in TABLES.items() if e.loaded_with == parent)
    for parent in sorted({e.loaded_with for e in TABLES.values() if e.loaded_with})
}
# The declared dispositions a first load appends into (`append_on_first_load`).
APPENDED_ON_FIRST_LOAD = ("merge", "insert-only")

# dlt settings this product relies on; an admin's environment or config.toml can still set them.
# (Telemetry is off from the package's import on: pipelines/__init__.py.)
DLT_DEFAULTS = {
    "EXTRACT__NEXT_ITEM_MODE": "fifo",  # device events read what the other resources saw
    "NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_ID": "true",  # scd2 on Arrow needs _dlt_id
    "NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID": "true",  # freshness per table
    # Files of at most 100,000 rows: normalize reads a whole file at once, and 2.6 million device
    # events of a 100,000-device first load in one file took it to 4 GB.
    "DATA_WRITER__FILE_MAX_ITEMS": "100000",
}
# ... and for DuckDB: one load job at a time. A DuckDB file has one writer, and dlt's default of
# 20 parallel jobs only multiplied the load's memory (20,000 devices: peak 812 MB -> 335 MB).
DUCKDB_DEFAULTS = {"LOAD__WORKERS": "1"}


@dataclass
class RunSettings:
    """Where and how to load (the command line's `run` options)."""

    warehouse: Path = Path("esper_warehouse.duckdb")
    destination: str = "duckdb"
    dataset: str = "esper"
    resources: Sequence[str] | None = None
    full: bool = False
    lock_timeout_s: float = 300.0
    # DuckDB's memory for the load and the bookkeeping after it (it spills to disk beyond it)
    load_memory_limit: str = "512MB"
    build_models: bool = True
    source_options: dict[str, Any] = field(default_factory=dict)  # e.g. base_url, api_key
    pipeline_name: str = PIPELINE_NAME  # one per tenant (pipelines/tenants.py)


@dataclass
class RunResult:
    """What a run did, for the summary and the tests."""

    run_id: str
    exit_code: int
    status: str
    mode: str = "incremental"
    as_of: datetime | None = None
    rows: dict[str, int] = field(default_factory=dict)
    reconciliation: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    retries: int = 0
    throttled: int = 0
    seconds: float = 0.0
    error: str | None = None
    models: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # table -> why it was skipped
    parts: int = 0  # parts of a full scan in parts committed by this run (walk.py)


def _without_json_hint_warning(record: logging.LogRecord) -> bool:
    """Arrow JSON columns differ from dlt's json hint by design; dlt warns once per page about it."""
    return "several column hints were different" not in record.getMessage()


def configure_dlt(destination: str) -> None:
    """The dlt settings above, unless the environment sets them; dlt's known-noise filter."""
    defaults = {**DLT_DEFAULTS, **(DUCKDB_DEFAULTS if destination == "duckdb" else {})}
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    logging.getLogger("dlt").addFilter(_without_json_hint_warning)  # a filter is added only once


def make_pipeline(settings: RunSettings) -> dlt.Pipeline:
    """A dlt pipeline whose working directory sits beside the warehouse file."""
    configure_dlt(settings.destination)
    warehouse = settings.warehouse.resolve()
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    destination: Any = settings.destination
    if settings.destination == "duckdb" and warehouse.stem == settings.dataset:
        # DuckDB names the file's catalog after its stem: `esper.devices` would be ambiguous, and
        # dlt's own load fails with a Binder error.
        raise EsperConfigError(
            f"the warehouse file {warehouse.name} is named like the dataset {settings.dataset!r}; "
            "choose another file name (default esper_warehouse.duckdb) or another --dataset"
        )
    if settings.destination == "duckdb":
        destination = dlt.destinations.duckdb(str(warehouse))
    return dlt.pipeline(
        pipeline_name=settings.pipeline_name,
        destination=destination,
        dataset_name=settings.dataset,
        pipelines_dir=str(working_dir(warehouse)),
    )


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error, looking through dlt's wrappers for the cause."""
    cause = root_cause(error)
    if isinstance(cause, WarehouseLocked) or is_lock_error(error):
        return EXIT_LOCKED
    if isinstance(cause, EsperAuthError | EsperConfigError):
        return EXIT_CONFIG
    if isinstance(cause, EsperNotFoundError) and getattr(cause, "tenant_level", False):
        return EXIT_CONFIG
    if isinstance(cause, EsperError):
        return EXIT_API
    if type(cause).__name__ in ("ConfigFieldMissingException", "ConfigurationValueError"):
        return EXIT_CONFIG
    return EXIT_UNEXPECTED


def root_cause(error: BaseException) -> BaseException:
    """The innermost error that explains a failure (EsperError first, else the deepest)."""
    chain = _chain(error)
    for item in chain:
        if isinstance(item, EsperError | WarehouseLocked):
            return item
    return chain[-1]


def error_text(error: BaseException) -> str:
    """The innermost cause of a failure, as the user reads it.

    An innermost error with no message of its own (`StopIteration` from a `next()` over
    nothing, turned into a RuntimeError by the generator it escaped) also says where it was
    raised and what the nearest error around it said, never just `StopIteration:`.
    """
    cause = root_cause(error)
    if str(cause):
        return f"{type(cause).__name__}: {cause}"
    chain = _chain(error)
    text = f"{type(cause).__name__} (no message), raised at {_raised_at(chain)}"
    around = next((e for e in reversed(chain[:-1]) if str(e)), None)
    return f"{text}; around it: {type(around).__name__}: {around}" if around else text


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, outermost first (dlt's `exception` attribute, then Python's)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return chain


def _raised_at(chain: Sequence[BaseException]) -> str:
    """`file:line in function` where the innermost error outside dlt's own code was raised.

    dlt's iteration leaves its own empty `StopIteration`s in the chain (as `__context__`); the
    place a user can act on is the deepest frame outside dlt of the innermost error that has one.
    """
    dlt_dir = str(Path(dlt.__file__).resolve().parent)
    for item in reversed(chain):
        frames = []
        tb = item.__traceback__
        while tb is not None:
            frames.append(tb)
            tb = tb.tb_next
        ours = [f for f in frames if not f.tb_frame.f_code.co_filename.startswith(dlt_dir)]
        if ours:
            code = ours[-1].tb_frame.f_code
            path = Path(code.co_filename)
            if path.is_relative_to(Path.cwd()):
                path = path.relative_to(Path.cwd())
            return f"{path}:{ours[-1].tb_lineno} in {code.co_name}"
    return "an unknown place"


def select(source: Any, names: Sequence[str] | None) -> Any:
    """Keep the named resources (and their companions); unknown names are a configuration error."""
    if not names:
        return source
    available = set(source.resources)
    wanted: set[str] = set()
    for name in names:
        if name not in available and name not in COMPANIONS and not name.startswith("data_tap__"):
            raise EsperConfigError(
                f"unknown resource {name!r}; choose from: {', '.join(sorted(available))}"
            )
        wanted |= {name, *COMPANIONS.get(name, ())}
    return source.with_resources(*sorted(wanted & available))


def merge_where_needed(source: Any, pipeline: dlt.Pipeline) -> None:
    """Tables declared `insert-only` take dlt's default merge where the destination lacks it.

    Device events are declared `insert-only` (their `Table` declarations): inserted when new, never
    rewritten. Events are immutable. dlt's default merge (delete-insert) de-duplicates the whole
    load with a window over every column: the 2.6 million events of a first 100,000-device load
    took DuckDB to 3.2 GB and 4.6 s; `insert-only` (a MERGE that inserts the ids not yet stored)
    took 0.65 GB and 2.7 s. Ids are unique within a run: each device's feed is read once and
    de-duplicated. Destinations without `insert-only` merge by dlt's default instead.
    """
    if "insert-only" in (pipeline.destination.capabilities().supported_merge_strategies or []):
        return
    for resource in source.resources.values():
        endpoint = TABLES.get(resource.table_name)
        if endpoint is not None and endpoint.disposition == "insert-only":
            resource.apply_hints(write_disposition="merge")


def append_on_first_load(source: Any, pipeline: dlt.Pipeline) -> list[str]:
    """A merge table's first load is an append: there is nothing in it to merge with yet.

    dlt's merge copies the load into a staging table, deletes the matching rows and inserts them
    again, and the staging copy stays in the warehouse. Into an empty table that is twice the
    writes for nothing: a 20,000-device first load (four tables) spent 1.2 s in the load and
    0.7 s closing the file; appending, 0.6 s and 0.4 s. It relies on every merge resource
    yielding each key at most once per run (the reads de-duplicate by key; see `scan.read_all`,
    `devices`, `activity._desc_list`, the event feeds). scd2 tables (`device_apps`) keep their
    merge: it writes their validity columns. From the next run on, every table merges.

    Returns:
        The tables that will be appended.
    """
    schema = pipeline.default_schema if pipeline.default_schema_name else None
    appended = []
    for resource in source.selected_resources.values():
        disposition = resource.write_disposition
        if isinstance(disposition, dict):
            if disposition.get("strategy") == "scd2":
                continue
            disposition = disposition.get("disposition")
        if disposition != "merge":
            continue
        table = schema.tables.get(resource.table_name) if schema else None
        if table is None or not has_table_seen_data(table):
            resource.apply_hints(write_disposition="append")
            appended.append(resource.table_name)
    return appended


# Where dlt looks for a source setting, most specific first (`SOURCES__ESPER__ESPER__X` ... `X`).
SOURCE_SECTIONS = (("sources", "esper", "esper"), ("sources", "esper"), ("sources",), ())


def check_source_settings(explicit: dict[str, Any]) -> None:
    """Every source setting (given here, else from the environment or .dlt/*.toml) is valid.

    Looked up as dlt does: each provider in turn (environment, secrets.toml, config.toml), and in
    each `SOURCES__ESPER__<NAME>` first, then fewer sections down to a bare `<NAME>`.

    Raises:
        EsperConfigError: a value outside what its setting accepts (named, with the range), or a
            .dlt/config.toml / secrets.toml that is not valid TOML (the file and the line).
    """
    values: dict[str, Any] = {}
    try:
        providers = Container()[PluggableRunContext].providers.providers
        for name in SETTINGS:
            if name in explicit:
                values[name] = explicit[name]
                continue
            values[name] = next(
                (
                    value
                    for provider in providers  # as dlt resolves: provider by provider
                    for sections in SOURCE_SECTIONS
                    if (value := provider.get_value(name, Any, None, *sections)[0]) is not None
                ),
                None,
            )
        checked = check_settings(values)
        for name in checked.get("data_tap_queries") or {}:
            data_tap_table(name)
    except (SettingError, EsperError) as error:
        raise EsperConfigError(str(error)) from None
    except Exception as error:
        if (problem := toml_problem(error)) is None:
            raise
        raise EsperConfigError(problem) from None


def toml_problem(error: BaseException) -> str | None:
    """One line naming the .dlt/*.toml file dlt could not read and where, else None.

    dlt's own error is a long traceback through its configuration machinery; what an admin needs
    is the file and the line (`... at line 3 col 19`).
    """
    if type(error).__name__ != "TomlProviderReadException":
        return None
    paths = [Path(p) for p in getattr(error, "full_paths", [])]
    where = next((str(p.resolve()) for p in paths if p.exists()), getattr(error, "file_name", "?"))
    detail = str(error).strip().splitlines()[-1]
    return f"{where} is not valid TOML: {detail}"


def append_into(source: Any, tables: Sequence[str]) -> None:
    """The resources that fill `tables` append (the later parts of a first load, `walk.py`)."""
    for resource in source.selected_resources.values():
        if resource.table_name in tables and not _is_scd2(resource.write_disposition):
            resource.apply_hints(write_disposition="append")


def _is_scd2(disposition: Any) -> bool:
    return isinstance(disposition, dict) and disposition.get("strategy") == "scd2"


def _appended_marker(settings: RunSettings) -> Path:
    """Where a run notes the tables it appends into, until its load has completed."""
    return working_dir(settings.warehouse.resolve()) / f"{settings.pipeline_name}.appended.json"


def _read_appended(marker: Path) -> list[str]:
    try:
        return sorted(orjson.loads(marker.read_bytes()))
    except FileNotFoundError:
        return []
    except orjson.JSONDecodeError:  # written by a run killed mid-write: every table it may name
        return sorted(t for t, e in TABLES.items() if e.disposition in APPENDED_ON_FIRST_LOAD)


def _note_appended(marker: Path, tables: Sequence[str]) -> None:
    """Record (atomically) that a load appends into `tables`, before anything is extracted.

    An append is not idempotent: a job DuckDB committed but dlt had not marked done when the run
    was killed is run again by the next run, which then inserts its rows twice. The next run
    finds this note and keeps one row per key in those tables (`remove_duplicate_keys`).
    """
    marker.parent.mkdir(parents=True, exist_ok=True)
    partial = marker.with_suffix(".tmp")
    partial.write_bytes(orjson.dumps(sorted({*_read_appended(marker), *tables})))
    partial.replace(marker)


def run(settings: RunSettings, *, client: EsperClient | None = None) -> RunResult:
    """Load the tenant once: extract, normalize, load, reconcile, record, build the models.

    One run at a time per warehouse: a second run waits for the first (`run_lock`) up to
    `lock_timeout_s`, then ends with exit 5 naming the other run's pid, having done nothing.
    """
    started = time.monotonic()
    if not 0 <= settings.lock_timeout_s < float("inf"):
        text = (
            f"lock_timeout_s = {settings.lock_timeout_s!r} (ESPER_WAREHOUSE__LOCK_TIMEOUT_S or "
            "--lock-timeout): expected a number of seconds >= 0"
        )
        log.error("run not started: %s", text)
        return RunResult("-", EXIT_CONFIG, "failed", error=f"EsperConfigError: {text}")
    with ExitStack() as stack:
        try:
            stack.enter_context(run_lock(settings.warehouse, settings.lock_timeout_s))
        except WarehouseLocked as error:
            log.error("run not started: %s", error)
            result = RunResult("-", EXIT_LOCKED, "failed", error=f"WarehouseLocked: {error}")
            result.seconds = time.monotonic() - started
            return result
        except KeyboardInterrupt:
            text = "interrupted while waiting for another run: " + AFTER_INTERRUPT["start"]
            log.warning("run %s", text)
            return RunResult("-", EXIT_INTERRUPTED, "interrupted", error=text)
        return _run_locked(settings, client)


def _run_locked(settings: RunSettings, client: EsperClient | None) -> RunResult:
    started = time.monotonic()
    started_at = datetime.now(UTC)
    run_id = uuid.uuid4().hex[:16]
    ledger = RunLedger()
    result = RunResult(run_id, EXIT_UNEXPECTED, "failed")
    pipeline: dlt.Pipeline | None = None
    progress = Progress(sys.stderr.isatty())
    own_client = client is None
    client_options = {"client": client} if client is not None else {}
    held: Any = None  # DuckDB: the one connection of the load and the bookkeeping after it
    stage = "start"
    committed_parts = 0  # of a full scan loaded in parts (sources/esper/walk.py)
    restore_signals = _stop_client_on_signals(lambda: client or ledger.client)
    try:
        log.info("run %s: warehouse %s, dataset %s", run_id, settings.warehouse, settings.dataset)
        check_source_settings(settings.source_options)  # before any request or file
        pipeline = make_pipeline(settings)
        marker = _appended_marker(settings)
        interrupted_appends = _read_appended(marker)  # an earlier run's load did not complete
        wait_for_file(settings.warehouse, settings.lock_timeout_s)
        # Cursors come from the local state, or from the warehouse when the directory is new.
        with_lock_wait(pipeline.sync_destination, settings.warehouse, settings.lock_timeout_s)
        check_owner(pipeline, str(settings.warehouse))  # one pipeline per dataset, never two
        if pipeline.has_pending_data:
            log.info("load: finishing a previous run's pending packages first")
            pipeline.normalize()
            with_lock_wait(pipeline.load, settings.warehouse, settings.lock_timeout_s)
        source_options = {**settings.source_options}
        if settings.resources:  # a selection loads in one part: parts carry the device tables
            source_options["commit_every_devices"] = sys.maxsize
        appended: list[str] = []
        while True:  # one pass, or the parts of a big full scan (sources/esper/walk.py)
            stage = "start"
            source = esper(
                full_scan=settings.full, ledger=ledger, **client_options, **source_options
            )
            client = client_options["client"] = ledger.client
            source = select(source, settings.resources)
            merge_where_needed(source, pipeline)
            append_into(source, appended)  # later parts append where the first part began to
            if first := append_on_first_load(source, pipeline):
                log.info("first load of %s: appended, not merged", ", ".join(sorted(first)))
                appended = sorted({*appended, *first})
                _note_appended(marker, appended)
            last = ledger.last_part()
            part = f"part {ledger.walk.parts + 1} " if ledger.in_parts else ""
            progress.attach(source)
            result.mode = "full" if ledger.full_scan else "incremental"
            result.as_of = ledger.as_of
            log.info("extract: %sstarted (%s scan, API time %s)", part, result.mode, ledger.as_of)
            stage = "extract"
            pipeline.extract(source)
            progress.done()
            log.info("extract: done (%s)", progress.text())
            log.info("normalize: started")
            stage = "normalize"
            pipeline.normalize()
            for table, count in _row_counts(pipeline).items():
                result.rows[table] = result.rows.get(table, 0) + count
            log.info("load: started")
            stage = "load"
            # DuckDB: waits for the file here, then holds it, so nothing below meets a lock
            held = _hold_warehouse(settings)
            pipeline.load(credentials=held)
            if interrupted_appends:  # a killed run's appends, now complete: one row per key
                for table, count in sorted(
                    remove_duplicate_keys(pipeline, interrupted_appends).items()
                ):
                    log.warning(
                        "load: %s held %d row(s) twice after an interrupted load; kept one per key",
                        table,
                        count,
                    )
                interrupted_appends = []
            if last:
                break
            committed_parts += 1
            result.parts = committed_parts
            stage = "between parts"
            if held is not None:  # the file is free between parts
                held = _release_warehouse(pipeline, settings, held)
            log.info(
                "load: %scommitted (%d devices listed so far); a run killed from here on "
                "goes on from this part",
                part,
                len(ledger.walk.seen),
            )
        log.info("load: done")
        stage = "after the load"
        marker.unlink(missing_ok=True)  # every appended load is complete and checked
        retire_missing_apps(pipeline, ledger)
        result.reconciliation = reconcile(pipeline, ledger, run_id)
        short = [r for r in result.reconciliation if not r["ok"]]
        if short:
            names = ", ".join(f"{r['table_name']} ({_shortfall(r)})" for r in short)
            result.error = f"reconciliation shortfall: {names}"
            result.status, result.exit_code = "reconciliation_failed", EXIT_RECONCILIATION
        elif ledger.skipped():
            result.status, result.exit_code = "partial", EXIT_PARTIAL
            result.error = _unavailable_text(ledger.skipped())
            log.warning("run partial: %s", result.error)
        else:
            result.status, result.exit_code = "ok", EXIT_OK
    except BaseException as error:
        if isinstance(error, SystemExit):
            raise
        if committed_parts and not is_interrupt(error):
            log.info("%d part(s) of this full scan are committed%s", committed_parts, KEPT)
        if is_interrupt(error):
            _stop(client or ledger.client)  # requests in flight end now, none is retried
            result.status, result.exit_code = "interrupted", EXIT_INTERRUPTED
            extracted = f" ({progress.text()})" if stage == "extract" else ""
            after = AFTER_INTERRUPT[stage]
            if committed_parts:
                after = after.replace("this run", IN_PROGRESS).replace(
                    "nothing was loaded; the next run starts afresh", "nothing more was loaded"
                )
            result.error = f"interrupted during {stage}{extracted}: {after}"
            if committed_parts:
                result.error += (
                    f" ({committed_parts} part(s) of this full scan are committed{KEPT})"
                )
            log.warning("run %s", result.error)
        else:
            result.exit_code = exit_code_for(error)
            result.error = error_text(error)
            log.error("run failed: %s", result.error)
            log.debug("run failed", exc_info=True)
    finally:
        restore_signals()
        progress.done()
        client = client or ledger.client
        result.unavailable = ledger.skipped()
        if client is not None:
            totals = client.totals()
            result.requests, result.retries = totals.requests, totals.retries
            result.throttled = totals.throttled
            if own_client:
                client.close()
    result.seconds = time.monotonic() - started
    try:
        if pipeline is not None and result.exit_code != EXIT_LOCKED:
            _record(pipeline, settings, result, started_at)
    finally:
        if held is not None:
            held.close()
    if result.exit_code in LOADED and settings.build_models:
        _build_models(settings, result)
    return result


def is_interrupt(error: BaseException) -> bool:
    """True when a failure is Ctrl-C or SIGTERM (dlt wraps them in `PipelineStepFailed`)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):  # also dlt's SignalReceivedException
            return True
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return False


def _stop(client: Any) -> None:
    """Stop the client's requests at once (`EsperClient.stop`; a no-op for other clients)."""
    stop = getattr(client, "stop", None)
    if callable(stop):
        stop()


def _stop_client_on_signals(client: Callable[[], Any]) -> Callable[[], None]:
    """On Ctrl-C or SIGTERM, stop the run's client first, then interrupt the main thread.

    Without it, requests in flight in worker threads were retried against a client being
    closed (~64 warnings about a bad file descriptor) before the run stopped. dlt installs its
    own handlers around normalize and load and restores these afterwards. Only the main thread
    can install handlers; elsewhere (a Dagster worker thread) this does nothing.

    Returns:
        A function that puts the previous handlers back.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        _stop(client())
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def _shortfall(row: dict[str, Any]) -> str:
    """What a reconciliation row found wrong: missing keys, keys stored more than once."""
    parts = [f"{row['missing']} missing"] if row["missing"] else []
    parts += [f"{row['duplicates']} duplicate keys"] if row.get("duplicates") else []
    return ", ".join(parts)


def _hold_warehouse(settings: RunSettings) -> Any:
    """DuckDB: one connection, opened once the file is free, for the load and what follows.

    dlt otherwise opens and closes the file for every load job and every query after it (16
    times in a small nightly, ~45 ms each). Other destinations: None (dlt's own credentials).
    The connection keeps DuckDB's buffers for the whole load, so it gets a memory limit: without
    one a 100,000-device first load reached 1.9 GB in the load alone, with 512 MB 0.9 GB.
    """
    if settings.destination != "duckdb":
        return None
    import duckdb

    path = str(settings.warehouse.resolve())
    try:
        return with_lock_wait(
            lambda: duckdb.connect(path, config={"memory_limit": settings.load_memory_limit}),
            settings.warehouse,
            settings.lock_timeout_s,
            "the load",
        )
    except duckdb.Error as error:
        if "memory" not in str(error).lower():
            raise
        raise EsperConfigError(
            f"load_memory_limit {settings.load_memory_limit!r} is not a memory size DuckDB "
            "accepts (e.g. 512MB or 2GB; ESPER_WAREHOUSE__LOAD_MEMORY_LIMIT); nothing was "
            "loaded, the extracted data is kept pending for the next run"
        ) from None


def _release_warehouse(pipeline: dlt.Pipeline, settings: RunSettings, held: Any) -> None:
    """Close the held DuckDB connection between parts; later queries open the file by its path.

    `pipeline.load(credentials=held)` keeps the connection as the destination's credentials: the
    run record written after a later part failed would otherwise meet a closed connection.
    """
    held.close()
    pipeline.destination.config_params["credentials"] = str(settings.warehouse.resolve())


def _row_counts(pipeline: dlt.Pipeline) -> dict[str, int]:
    info = pipeline.last_trace.last_normalize_info if pipeline.last_trace else None
    counts = dict(info.row_counts) if info else {}
    return {t: n for t, n in sorted(counts.items()) if not t.startswith("_dlt")}


def _record(
    pipeline: dlt.Pipeline, settings: RunSettings, result: RunResult, started_at: datetime
) -> None:
    """Write the `_esper_runs` row (and the reconciliation rows); never hides the run's outcome."""
    run_row = {
        "run_id": result.run_id,
        "started_at": started_at,
        "finished_at": datetime.now(UTC),
        "as_of": result.as_of,
        "mode": result.mode,
        "status": result.status,
        "requests": result.requests,
        "retries": result.retries,
        "throttled": result.throttled,
        "rows": orjson.dumps(result.rows).decode(),
        "error": result.error,
        "unavailable": orjson.dumps(result.unavailable).decode(),
        "parts": result.parts,
    }
    try:
        with_lock_wait(
            lambda: bookkeeping.write(pipeline, run_row, result.reconciliation),
            settings.warehouse,
            settings.lock_timeout_s,
            "the run record",
        )
    except WarehouseLocked as error:
        log.error("could not record the run: %s", error)
        result.exit_code, result.error = EXIT_LOCKED, str(error)
    except Exception as error:  # the run's own outcome matters more than its record
        log.error("could not record the run: %s", error_text(error))
        if result.exit_code in LOADED:
            result.exit_code, result.error = exit_code_for(error), error_text(error)


def _unavailable_text(unavailable: dict[str, str]) -> str:
    """One clause per skipped table, e.g. ``status_metrics (GET /v2/... answered 403 (...))``."""
    return "; ".join(f"{table}: {why}" for table, why in sorted(unavailable.items()))


def _build_models(settings: RunSettings, result: RunResult) -> None:
    if settings.destination != "duckdb":
        log.info("models: skipped (they are DuckDB SQL; destination is %s)", settings.destination)
        return
    if not (Path(__file__).parent / "models.py").exists():
        log.info("models: skipped (pipelines/models.py is not there yet)")
        return
    from esper_warehouse.pipelines import models  # type: ignore[attr-defined]

    log.info("models: building")
    try:
        result.models = with_lock_wait(
            lambda: models.build_models(settings.warehouse, dataset=settings.dataset),
            settings.warehouse,
            settings.lock_timeout_s,
            "the models",
        )
        log.info("models: %d built", len(result.models))
    except WarehouseLocked as error:
        result.exit_code, result.error = EXIT_LOCKED, str(error)
        log.error("models: %s", error)
    except Exception as error:
        result.exit_code, result.error = EXIT_UNEXPECTED, f"models failed: {error}"
        log.error("models failed: %s", error)


def summary(result: RunResult) -> str:
    """The end-of-run summary: rows per table, requests, retries, 429s, duration."""
    lines = [
        f"run {result.run_id}: {result.status} ({result.mode} scan, API time {result.as_of}), "
        f"{result.seconds:.1f} s",
        f"requests {result.requests}, retries {result.retries}, throttled (429) {result.throttled}",
    ]
    if result.rows:
        width = max(map(len, result.rows))
        lines.append("rows loaded:")
        lines += [f"  {t:<{width}}  {n:>9,}" for t, n in result.rows.items()]
    short = [r for r in result.reconciliation if not r["ok"]]
    if result.reconciliation:
        lines.append(
            f"reconciled {len(result.reconciliation)} table(s) against the API's counts: "
            + ("all complete" if not short else f"{len(short)} short")
        )
        for r in short:
            lines.append(
                f"  SHORT {r['table_name']}: expected {r['expected']}, loaded {r['loaded']}, "
                f"missing {r['missing']}, duplicate keys {r.get('duplicates', 0)}"
            )
    if result.models:
        lines.append(f"models built: {len(result.models)}")
    if result.error:
        lines.append(f"error: {result.error}")
    return "\n".join(lines)
