"""The nightly run: extract the Esper source, load it, reconcile, record the run, build the models.

Its exit code (`RunResult.exit_code`, the command's) is an `Exit` of pipelines/exit_codes.py:
`Exit.PARTIAL` when it loaded and reconciled but the API refused some tables or some devices' or
records' parts (see `RunResult.unavailable`).

This module holds the run and its part loop; the rest of a run sits beside it in `run/` (its
`__init__.py` lists them in the order a run passes through them).
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dlt
from esper_warehouse.sources.esper import EsperSourceConfiguration, RunLedger, esper
from esper_warehouse.sources.esper.http import EsperClient, redact

from ..build.raw_contract import drop_earlier_placeholders
from ..exit_codes import LOADED, Exit
from ..warehouse import (
    WarehouseLocked,
    create_if_missing,
    file_problem,
    path_problem,
    remove_created,
    run_lock,
    with_lock_wait,
)
from .clock import trusted_as_of
from .dispositions import (
    append_into,
    append_on_first_load,
    appended_marker,
    merge_where_needed,
    note_appended,
    read_appended,
    select,
)
from .failures import error_text, exit_code_for, is_interrupt
from .held import check_memory_limit, hold_warehouse, release_warehouse
from .interrupts import AFTER_INTERRUPT, KEPT, interrupted_text, stop_client, stop_client_on_signals
from .ownership import check_owner
from .pipeline import make_pipeline, source_settings
from .progress import Progress
from .reconcile import reconcile, remove_duplicate_keys, retire_missing_apps
from .record import (
    age_models,
    build_models,
    mark_partial,
    record,
    record_start,
    shortfall,
    summary,
)
from .types import PIPELINE_NAME, RunResult, RunSettings

# What callers import from here: the run, its settings and result (exit codes: `Exit`).
__all__ = ["PIPELINE_NAME", "RunResult", "RunSettings", "run", "summary"]

log = logging.getLogger("esper_warehouse")


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
        return RunResult("-", Exit.CONFIG, "failed", error=f"EsperConfigError: {text}")
    if settings.destination == "duckdb" and (problem := path_problem(settings.warehouse)):
        code, text = problem  # the lock beside the file would create a folder named by mistake
        log.error("run not started: %s", text)
        return RunResult("-", code, "failed", error=text)
    with ExitStack() as stack:
        try:
            stack.enter_context(run_lock(settings.warehouse, settings.lock_timeout_s))
        except WarehouseLocked as error:
            # not recorded: the run holding the lock may hold the warehouse file too
            log.error("run not started: %s", error)
            result = RunResult("-", Exit.LOCKED, "locked", error=f"WarehouseLocked: {error}")
            result.seconds = time.monotonic() - started
            return result
        except OSError as error:  # its folder cannot be written (read-only, full, not ours)
            code, text = file_problem(settings.warehouse, error) or (Exit.FAILED, str(error))
            log.error("run not started: %s", text)
            return RunResult("-", code, "failed", error=text)
        except KeyboardInterrupt:
            text = "interrupted while waiting for another run: " + AFTER_INTERRUPT["start"]
            log.warning("run %s", text)
            return RunResult("-", Exit.INTERRUPTED, "interrupted", error=text)
        return _run_locked(settings, client)


def _run_locked(settings: RunSettings, client: EsperClient | None) -> RunResult:
    state = _Run(settings, client)
    restore_signals = stop_client_on_signals(state.current_client)
    try:
        state.prepare()
        while not state.load_part():  # one pass, or the parts of a big full scan (scan/walk.py)
            pass
        state.after_load()
    except BaseException as error:
        if isinstance(error, SystemExit):
            raise
        state.failed(error)
    finally:
        restore_signals()
        state.close_client()
    return state.outcome()


class _Run:
    """One run under the run lock: the state its steps share, and the steps.

    `prepare`, then `load_part` until the last part, then `after_load`; `failed` when one of them
    raised; `close_client` always; `outcome` records the run and builds the models.
    """

    def __init__(self, settings: RunSettings, client: EsperClient | None) -> None:
        self.settings = settings
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.ledger = RunLedger()
        self.result = RunResult(uuid.uuid4().hex[:16], Exit.FAILED, "failed")
        self.pipeline: dlt.Pipeline | None = None
        self.progress = Progress(sys.stderr.isatty())
        self.client = client  # the caller's, else the source's own once it is made
        self.own_client = client is None
        self.client_options: dict[str, Any] = {"client": client} if client is not None else {}
        self.config: EsperSourceConfiguration | None = None  # the source's: set by prepare()
        # DuckDB: the one connection of the reads before the extract, then (another) of the load
        # and the bookkeeping after it
        self.held: Any = None
        # The one sql_client of the steps after the load (reconciliation, the run record): each
        # one opened resolves dlt's destination configuration and reads the schema again.
        self.sql: Any = None
        self.closing = ExitStack()  # closes `sql`
        self.stage = "start"  # the step in progress, for what an interruption leaves
        self.committed_parts = 0  # of a full scan loaded in parts (sources/esper/scan/walk.py)
        self.appended: list[str] = []  # tables this run appends into (`append_on_first_load`)
        self.read: set[str] = set()  # the tables this run's resources read, over all its parts
        self.marker = Path()  # where this run notes its appends: set by prepare()
        self.interrupted_appends: list[str] = []
        self.created = False  # this run created the warehouse file
        self.file_failed = False  # the warehouse file itself is what failed: nothing to record in
        self.load_started = False  # something was (or is being) loaded into it

    def current_client(self) -> Any:
        return self.client or self.ledger.plan.client

    def prepare(self) -> None:
        """Check the settings, open the pipeline, finish what an earlier run left pending."""
        settings = self.settings
        log.info(
            "run %s: warehouse %s, dataset %s",
            self.result.run_id,
            settings.warehouse,
            settings.dataset,
        )
        config = source_settings(settings)  # before any request or file
        check_memory_limit(settings)
        self.pipeline = pipeline = make_pipeline(settings)
        self.marker = appended_marker(settings)
        # an earlier run's load did not complete
        self.interrupted_appends = read_appended(self.marker)
        if settings.destination == "duckdb":  # before dlt creates it in the default format
            self.created = create_if_missing(settings.warehouse)
        # DuckDB: one connection (once the file is free) for every read below, freed before
        # the extract; dlt would open the file for each of them (~13 ms of CPU each).
        if (held := hold_warehouse(settings, what="the warehouse")) is not None:
            self.held = pipeline.destination.config_params["credentials"] = held
            # before dlt reads the raw dataset: it could not load into these (raw_contract.py)
            if dropped := drop_earlier_placeholders(held, settings.dataset):
                log.info(
                    "dropped the empty stand-ins of an earlier release: %s", ", ".join(dropped)
                )
        # Cursors come from the local state, or from the warehouse when the directory is new.
        with_lock_wait(pipeline.sync_destination, settings.warehouse, settings.lock_timeout_s)
        check_owner(pipeline, str(settings.warehouse))  # one pipeline per dataset, never two
        record_start(pipeline, settings, self.result, self.started_at)  # a killed run leaves it
        if pipeline.has_pending_data:
            log.info("load: finishing a previous run's pending packages first")
            self.load_started = True
            pipeline.normalize()
            with_lock_wait(pipeline.load, settings.warehouse, settings.lock_timeout_s)
        if self.held is not None:  # the file is free while the API is read
            self.held = release_warehouse(pipeline, settings, self.held)
        config.full_scan = settings.full  # the run's own choice wins over a configured value
        if settings.resources:  # a selection loads in one part: parts carry the device tables
            config.commit_every_devices, config.commit_every_minutes = sys.maxsize, 0
        self.config = config

    def load_part(self) -> bool:
        """Extract, normalize and load one part (or the whole run); True after the last part."""
        assert self.pipeline is not None  # prepare() made it
        self.stage = "start"
        source = self._source()
        plan = self.ledger.plan
        last = plan.last_part()
        part = f"part {plan.walk.parts + 1} " if plan.walk is not None and plan.in_parts else ""
        self.progress.attach(source)
        result = self.result
        result.mode = "full" if plan.full_scan else "incremental"
        result.as_of = plan.as_of
        log.info(
            "extract: started (%s%s scan, API time %s)",
            f"{part.rstrip()}, " if part else "",
            result.mode,
            result.as_of,
        )
        self.stage = "extract"
        self.pipeline.extract(source)
        self.progress.done()
        result.as_of, result.clock = trusted_as_of(
            plan.as_of, self.ledger.data_clock.newest, datetime.now(UTC)
        )
        if result.clock:
            log.warning("%s", result.clock)
        log.info("extract: done (%s)", self.progress.text())
        log.info("normalize: started")
        self.stage = "normalize"
        self.pipeline.normalize()
        for table, count in row_counts(self.pipeline).items():
            result.rows[table] = result.rows.get(table, 0) + count
        self._load()
        if last:
            return True
        self._between_parts(part)
        return False

    def _source(self) -> Any:
        """The source of the next part, each resource told how to write."""
        names = {
            "api_key_name": self.settings.api_key_name,
            "base_url_name": self.settings.base_url_name,
        }
        source = esper(
            self.config,
            ledger=self.ledger,
            **self.client_options,
            **{name: value for name, value in names.items() if value is not None},
        )
        self.client = self.client_options["client"] = self.ledger.plan.client
        source = select(source, self.settings.resources)
        self.read |= set(source.selected_resources)
        if self.settings.resources:
            self.ledger.plan = replace(
                self.ledger.plan, selected=frozenset(source.selected_resources)
            )
        merge_where_needed(source, self.pipeline)
        append_into(source, self.appended)  # later parts append where the first part began to
        if first := append_on_first_load(source, self.pipeline):
            log.info("first load of %s: appended, not merged", ", ".join(sorted(first)))
            self.appended = sorted({*self.appended, *first})
            note_appended(self.marker, self.appended)
        return source

    def _load(self) -> None:
        """Load the normalized part; then one row per key where a killed run appended twice."""
        assert self.pipeline is not None
        log.info("load: started")
        self.stage = "load"
        self.load_started = True
        # DuckDB: waits for the file here, then holds it, so nothing below meets a lock
        self.held = hold_warehouse(self.settings, self.ledger.plan.device_count)
        self.pipeline.load(credentials=self.held)
        if self.interrupted_appends:  # a killed run's appends, now complete: one row per key
            for table, count in sorted(
                remove_duplicate_keys(self.pipeline, self.interrupted_appends).items()
            ):
                log.warning(
                    "load: %s held %d row(s) twice after an interrupted load; kept one per key",
                    table,
                    count,
                )
            self.interrupted_appends = []

    def _between_parts(self, part: str) -> None:
        """A part is committed: count it, free the file until the next part."""
        assert self.pipeline is not None
        walk = self.ledger.plan.walk
        assert walk is not None  # only a full scan's walk comes in parts
        self.committed_parts += 1
        self.result.parts = self.committed_parts
        self.stage = "between parts"
        if self.held is not None:  # the file is free between parts
            self.held = release_warehouse(self.pipeline, self.settings, self.held)
        log.info(
            "load: %scommitted (%d devices listed so far); a run killed from here on "
            "goes on from this part",
            part,
            len(walk.seen),
        )

    def after_load(self) -> None:
        """Every part is loaded: reconcile against the API's counts, then the run's status."""
        assert self.pipeline is not None
        log.info("load: done")
        self.stage = "after the load"
        self.marker.unlink(missing_ok=True)  # every appended load is complete and checked
        result = self.result
        self.sql = client = self.closing.enter_context(self.pipeline.sql_client())
        retire_missing_apps(client, self.ledger)
        result.reconciliation = reconcile(self.pipeline, client, self.ledger, result.run_id)
        short = [r for r in result.reconciliation if not r["ok"]]
        if short:
            names = ", ".join(f"{r['table_name']} ({shortfall(r)})" for r in short)
            result.error = f"reconciliation shortfall: {names}"
            result.status, result.exit_code = "reconciliation_failed", Exit.UNFINISHED
        elif skipped := self.ledger.refusals.skipped():
            mark_partial(result, skipped)
        else:
            result.status, result.exit_code = "ok", Exit.OK

    def failed(self, error: BaseException) -> None:
        """A step raised: the run is interrupted (Ctrl-C, SIGTERM) or failed with its error's code."""
        result = self.result
        self._close_sql()  # the run record opens its own: this one may be what failed
        if self.committed_parts and not is_interrupt(error):
            log.info("%d part(s) of this full scan are committed%s", self.committed_parts, KEPT)
        if is_interrupt(error):
            stop_client(self.current_client())  # requests in flight end now, none is retried
            result.status, result.exit_code = "interrupted", Exit.INTERRUPTED
            result.error = interrupted_text(self.stage, self.committed_parts, self.progress.text())
            log.warning("run %s", result.error)
        else:
            result.exit_code = exit_code_for(error)
            # the last guard: a text the server wrote (a body's field names) may hold the key
            result.error = redact(error_text(error))
            problem = file_problem(self.settings.warehouse, error)
            if problem is not None and problem[0] != Exit.LOCKED:  # a lock's own words say more
                result.exit_code, result.error = problem
                self.file_failed = True
            log.error("run failed: %s", result.error)
            log.debug("run failed", exc_info=True)

    def close_client(self) -> None:
        """The end of every run: the progress line, what was skipped, the client's totals."""
        self.progress.done()
        client = self.current_client()
        result = self.result
        # the API time this run saw, even when it failed before its plan (a 500 on the opening
        # count still carries a `Date`): its night is counted at that time (int_as_of.aged_at)
        result.as_of = result.as_of or self.ledger.plan.as_of
        if result.as_of is None and client is not None:
            result.as_of = client.server_time
        result.device_count = self.ledger.plan.device_count
        result.unavailable = self.ledger.refusals.skipped()
        result.tables = self.ledger.refusals.treatments(self.read, result.rows)
        result.unreadable = self.ledger.unreadable.counts()
        result.rejected = rejected_rows(self.ledger, result.run_id)
        if client is not None:
            totals = client.totals()
            result.requests, result.retries = totals.requests, totals.retries
            result.throttled = totals.throttled
            pacing = client.pacing()
            result.answered, result.not_ours = (
                int(pacing["answered"] or 0),
                int(pacing["not_ours"] or 0),
            )
            result.answered_per_s, result.pace = pacing["answered_per_s"], pacing["pace"]
            if self.own_client:
                client.close()

    def outcome(self) -> RunResult:
        """Record the run (unless the warehouse stayed locked), then build the models.

        A run that created the warehouse file and failed before anything was loaded or is
        pending removes it instead: an empty file would pass for a warehouse (`report` and
        the notebooks would read it, `status` would show a run), and the failure is said on
        stderr and in the summary.
        """
        result = self.result
        result.seconds = time.monotonic() - self.started
        if self._nothing_loaded_into_a_new_file():
            self._close_sql()
            if self.held is not None:
                self.held.close()
            remove_created(self.settings.warehouse)
            log.info(
                "run: nothing was loaded, so no warehouse file is left at %s",
                self.settings.warehouse,
            )
            return result
        unrecorded = self.file_failed or result.exit_code == Exit.LOCKED
        if self.file_failed:  # not a DuckDB file, damaged, its disk full: it holds no record
            log.info("run: not recorded, as %s itself could not be used", self.settings.warehouse)
        try:
            if self.pipeline is not None and not unrecorded:
                record(self.pipeline, self.settings, result, self.started_at, self.sql)
        finally:
            self._close_sql()
            if self.held is not None:
                self.held.close()
        if self.settings.build_models:
            if result.exit_code in LOADED:
                build_models(self.settings, result)
            elif not (unrecorded or self.load_started):
                age_models(self.settings, result)  # the same data, a night older
        return result

    def _close_sql(self) -> None:
        self.sql = None
        self.closing.close()

    def _nothing_loaded_into_a_new_file(self) -> bool:
        """This run created the file, failed, and left nothing loaded nor pending for it.

        An interrupted run is not one: Ctrl-C is the user's own act, and its record says where
        it stopped and what the next run does (docs/reference/exit-codes.md, 130)."""
        code = self.result.exit_code
        if not self.created or self.load_started:
            return False
        if code in LOADED or code == Exit.INTERRUPTED:
            return False
        return self.pipeline is None or not self.pipeline.has_pending_data


def rejected_rows(ledger: RunLedger, run_id: str) -> list[dict[str, Any]]:
    """The `_esper_rejected` rows of the records this run set aside (`RunLedger.rejected`)."""
    now = datetime.now(UTC)
    return [
        {
            "run_id": run_id,
            "table_name": kept.table,
            "route": kept.route,
            "column_name": kept.column,
            "reason": f"{kept.table}.{kept.column} missing or null",
            "record": kept.record,
            "rejected_at": now,
        }
        for kept in ledger.rejected.records()
    ]


def row_counts(pipeline: dlt.Pipeline) -> dict[str, int]:
    info = pipeline.last_trace.last_normalize_info if pipeline.last_trace else None
    counts = dict(info.row_counts) if info else {}
    return {t: n for t, n in sorted(counts.items()) if not t.startswith("_dlt")}
