"""After a run's load: its `_esper_runs` record, the models, the end-of-run summary."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import dlt
import duckdb
import orjson

from .. import bookkeeping, readable
from ..build import models
from ..exit_codes import LOADED, Exit
from ..warehouse import WarehouseLocked, file_problem, with_lock_wait
from .failures import error_text, exit_code_for
from .types import RunResult, RunSettings

log = logging.getLogger("esper_warehouse")


def shortfall(row: dict[str, Any]) -> str:
    """What a reconciliation row found wrong: missing keys, keys stored more than once."""
    parts = [f"{row['missing']} missing"] if row["missing"] else []
    parts += [f"{row['duplicates']} duplicate keys"] if row.get("duplicates") else []
    return ", ".join(parts)


def record(
    pipeline: dlt.Pipeline,
    settings: RunSettings,
    result: RunResult,
    started_at: datetime,
    client: Any = None,
) -> None:
    """Write the `_esper_runs` row (and the reconciliation rows); never hides the run's outcome.

    `client`: the run's open `sql_client`, if it has one (else the record opens its own).
    """
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
        "unreadable": orjson.dumps(result.unreadable).decode(),
        "answered": result.answered,
        "answered_per_s": result.answered_per_s,
        "not_ours": result.not_ours,
        "pace": result.pace,
        "device_count": result.device_count,
        "tables": orjson.dumps(result.tables).decode(),
    }
    try:
        with_lock_wait(
            lambda: bookkeeping.write(
                pipeline, run_row, result.reconciliation, client, result.rejected
            ),
            settings.warehouse,
            settings.lock_timeout_s,
            "the run record",
        )
    except WarehouseLocked as error:
        log.error("could not record the run: %s", error)
        result.exit_code, result.error = Exit.LOCKED, str(error)
    except Exception as error:  # the run's own outcome matters more than its record
        log.error("could not record the run: %s", error_text(error))
        if result.exit_code in LOADED:
            result.exit_code, result.error = exit_code_for(error), error_text(error)


def record_start(
    pipeline: dlt.Pipeline, settings: RunSettings, result: RunResult, started_at: datetime
) -> None:
    """Write the run's `started` row (bookkeeping.STARTED), which its outcome replaces: a run
    killed before its end (SIGKILL, a reboot) is still a night `status` and the ages count."""
    row = {"run_id": result.run_id, "started_at": started_at, "status": bookkeeping.STARTED}
    with_lock_wait(
        lambda: bookkeeping.write(pipeline, row, []),
        settings.warehouse,
        settings.lock_timeout_s,
        "the run record",
    )


def mark_partial(result: RunResult, skipped: dict[str, str]) -> None:
    """The run loaded all it could but `skipped` (table -> why): partial, exit 6. The log line
    names the tables only: the lines before it said why, one a table."""
    result.status, result.exit_code = "partial", Exit.PARTIAL
    result.error = unavailable_text(skipped)
    log.warning("run partial: %d table(s) skipped: %s", len(skipped), ", ".join(sorted(skipped)))


def unavailable_text(unavailable: dict[str, str]) -> str:
    """One clause per skipped table, e.g. ``status_metrics (GET /v2/... answered 403 (...))``."""
    return "; ".join(f"{table}: {why}" for table, why in sorted(unavailable.items()))


def build_models(settings: RunSettings, result: RunResult) -> None:
    """Build the models after a loaded run (DuckDB only); a failure becomes the run's outcome."""
    if settings.destination != "duckdb":
        log.info("models: skipped (they are DuckDB SQL; destination is %s)", settings.destination)
        return
    log.info("models: building")
    try:
        result.models = _build(settings)
        log.info("models: %d built", len(result.models))
    except WarehouseLocked as error:
        result.exit_code, result.error = Exit.LOCKED, str(error)
        log.error("models: %s", error)
    except Exception as error:
        code, text = file_problem(settings.warehouse, error) or (Exit.FAILED, str(error))
        result.exit_code, result.error = code, f"models failed: {text}"
        log.error("models failed: %s", text)


def _build(settings: RunSettings) -> list[str]:
    """The model build, once the warehouse is free (within the run's lock timeout)."""
    return with_lock_wait(  # type: ignore[no-any-return]
        lambda: models.build_models(settings.warehouse, dataset=settings.dataset),
        settings.warehouse,
        settings.lock_timeout_s,
        "the models",
    )


def age_models(settings: RunSettings, result: RunResult) -> None:
    """After a run that failed or was interrupted before any load began, build the models again
    where they were built: their data is the same, but every table is a night older
    (intermediate.int_as_of.aged_at), and every age note says so. (A run whose load began may have
    committed some tables: the next loaded run's build ages and judges them.) The run's outcome
    stays its own: a build that fails here is logged, never the run's error."""
    if settings.destination != "duckdb" or not models_built(settings.warehouse):
        return
    log.info("models: building again, a night older")
    try:
        result.models = _build(settings)
        log.info("models: %d built", len(result.models))
    except Exception as error:
        log.warning("models: not built again (%s); their ages are those of the last build", error)


def models_built(warehouse: Any) -> bool:
    """Whether the warehouse holds the freshness models (a build has run on it)."""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            return bool(
                con.execute(
                    "select count(*) from information_schema.tables where table_schema = "
                    "'intermediate' and table_name = 'int_family_freshness'"
                ).fetchone()[0]  # type: ignore[index]
            )
    except duckdb.Error:
        return False


def summary(result: RunResult) -> str:
    """The end-of-run summary: rows per table, requests, retries, 429s, duration."""
    seen = f"API time {result.as_of}" if result.as_of else "no API time: no answer was read"
    if result.run_id == "-":  # it never started: no scan, no request
        first = f"run not started ({result.status}), {result.seconds:.1f} s"
    else:
        first = f"run {result.run_id}: {result.status} ({result.mode} scan, {seen}), "
        first += f"{result.seconds:.1f} s"
    lines = [
        first,
        f"requests {result.requests}, retries {result.retries}, throttled (429) {result.throttled}"
        + (f" ({result.not_ours} not caused by this run's pace)" if result.not_ours else ""),
    ]
    if result.clock:
        lines.append(result.clock)
    if result.answered_per_s:
        paced = f", paced at {result.pace:.1f}/s at the end" if result.pace else ", unpaced"
        lines.append(f"answered {result.answered} at {result.answered_per_s:.1f}/s{paced}")
    if result.rows:
        width = max(map(len, result.rows))
        lines.append("rows loaded:")
        lines += [f"  {t:<{width}}  {n:>9,}" for t, n in result.rows.items()]
    short = [r for r in result.reconciliation if not r["ok"]]
    if result.reconciliation:
        lines.append(
            f"reconciled {len(result.reconciliation)} table(s) against the API's counts: "
            + ("all complete" if not short else f"{len(short)} short")
            + (
                f"; {len(result.unavailable)} skipped in whole or in part"
                if result.unavailable
                else ""
            )
        )
        for r in short:
            lines.append(
                f"  SHORT {r['table_name']}: expected {r['expected']}, loaded {r['loaded']}, "
                f"missing {r['missing']}, duplicate keys {r.get('duplicates', 0)}"
            )
    lines += bookkeeping.unreadable_lines(result.unreadable)
    if result.models:
        lines.append(f"models built: {len(result.models)}")
    if result.status == "partial" and result.unavailable:
        lines += partial_lines(result.unavailable)
    elif result.error:
        lines.append(f"error: {result.error}")
    return "\n".join(lines)


# A partial run's reasons as the summary shows them: at most this many clauses a table, each cut
# to this many characters; `status` and `_esper_runs.unavailable` keep them whole.
REASONS_SHOWN = 3
REASON_WIDTH = 240


def partial_lines(unavailable: dict[str, str]) -> list[str]:
    """A partial run's skipped tables, one line each, with each reason's clauses under it."""
    lines = [f"partial: {len(unavailable)} table(s) skipped in whole or in part:"]
    cut = False
    for table, why in sorted(unavailable.items()):
        clauses = why.split("; ")
        shown = [_cut(c) for c in clauses[:REASONS_SHOWN]]
        cut = cut or len(shown) < len(clauses) or shown != clauses[: len(shown)]
        lines.append(f"  {table}: {shown[0]}")
        lines += [f"    {clause}" for clause in shown[1:]]
        if len(shown) < len(clauses):
            lines.append(f"    ({readable.shown_of(len(shown), len(clauses))} reasons)")
    if cut:
        lines.append("  (`esper-warehouse status` shows every reason whole)")
    return lines


def _cut(text: str) -> str:
    if len(text) <= REASON_WIDTH:
        return text
    return f"{text[:REASON_WIDTH]}… ({readable.shown_of(REASON_WIDTH, len(text))} characters)"
