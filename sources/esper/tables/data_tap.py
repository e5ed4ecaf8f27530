"""Data Tap queries: named SQL from configuration, each loaded into its own `data_tap__<name>` table.

The shape is Esper's Query API documentation (docs/spec/live-observations.md section 15; no live
sample exists), held in this module only: `POST /data-tap/v0/queries {query, is_download,
row_limit, latest_data}` answers `{content: {id, status, ...}}`; `GET /data-tap/v0/queries/{id}`
(no trailing slash) answers `{content: {status, result, error_message}}` with `result` null or
`{schema: {columns: [{name, position, type_name}]}, data_array, truncated}` and status PENDING,
RUNNING, SUCCEEDED, FAILED, CANCELED or CLOSED. Waiting for a job is polling, not an HTTP retry:
the client still owns every request's retries; this module owns how long to wait for the job.

Data Tap's quota is the tenant's (live-observations section 18), so this module is a careful
guest: one query at a time, a query is submitted once (never re-sent after an uncertain answer),
polls wait 10, 20, then 30 s (`data_tap_poll_s`), and every request (submissions and polls) is
counted against `data_tap_requests_per_hour` over a rolling hour that spans runs (the request
times are kept in the source's dlt state). A quota refusal, a spent budget or a failed job skips
that query's table for this run (the run ends partial); the other tables load.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dlt
import pyarrow as pa
from dlt.extract.resource import DltResource

from ..common import keep_what_was_loaded
from ..http import EsperAPIError, EsperClient, EsperError, EsperUnavailableError
from ..run.state import DATA_TAP_REQUESTS
from ..settings import DATA_TAP_POLL_S, DATA_TAP_REQUESTS_PER_HOUR

DATA_TAP_PATH = "/data-tap/v0/queries"

log = logging.getLogger("esper_warehouse.source")

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,50}$")
_WAITING = {"PENDING", "RUNNING", "QUEUED"}
_HOUR_S = 3600.0
_QUOTA = re.compile(r"Tenant rate limit exceeded[^\"'}]*")
_FAILED = {"FAILED", "CANCELED", "CANCELLED", "CLOSED"}

# Result column types (Databricks-style type names) -> the polars type each is cast to.
# Names, not polars objects: polars is imported only when a Data Tap result is converted, so a run
# without Data Tap queries does not pay for its import (~0.5 s of every run's start).
_TYPES: dict[str, str] = {
    "STRING": "Utf8",
    "CHAR": "Utf8",
    "VARCHAR": "Utf8",
    "INT": "Int64",
    "INTEGER": "Int64",
    "LONG": "Int64",
    "BIGINT": "Int64",
    "SHORT": "Int64",
    "SMALLINT": "Int64",
    "BYTE": "Int64",
    "TINYINT": "Int64",
    "DOUBLE": "Float64",
    "FLOAT": "Float64",
    "REAL": "Float64",
    "DECIMAL": "Float64",
    "BOOLEAN": "Boolean",
    "BOOL": "Boolean",
    "DATE": "Date",
    "TIMESTAMP": "Datetime_UTC",
    "TIMESTAMP_NTZ": "Datetime",
}


class DataTapError(EsperError):
    """A Data Tap query failed, was truncated, or did not finish before its deadline."""


class RequestBudget:
    """Data Tap requests per rolling hour, submissions and polls alike, across runs.

    Args:
        per_hour: the most requests any hour may hold (`data_tap_requests_per_hour`).
        now: wall-clock seconds (the quota is the server's, over real time).
    """

    def __init__(self, per_hour: int, now: Callable[[], float] = time.time) -> None:
        self.per_hour, self.now = per_hour, now
        self.sent: list[float] = []
        self.spent = 0  # requests this run

    def attach(self, state: dict[str, Any]) -> None:
        """Share the request times kept in `state` (dlt source state: committed with the load)."""
        kept = state.setdefault(DATA_TAP_REQUESTS, [])
        if kept is not self.sent:
            kept.extend(t for t in self.sent if t not in kept)
            self.sent = kept

    def left(self) -> int:
        """Requests the rolling hour still allows."""
        cutoff = self.now() - _HOUR_S
        self.sent[:] = [t for t in self.sent if t > cutoff]
        return self.per_hour - len(self.sent)

    def spend(self, name: str, needed: int = 1) -> None:
        """Count one request, after checking that `needed` are left.

        Raises:
            EsperUnavailableError: the budget is spent; the message says when a request frees up.
        """
        if self.left() < needed:
            frees = datetime.fromtimestamp(min(self.sent) + _HOUR_S, UTC) if self.sent else None
            raise EsperUnavailableError(
                f"Data Tap query {name!r} not sent: the request budget of {self.per_hour} per "
                "hour (data_tap_requests_per_hour) is spent"
                + (f" until {frees:%H:%M} UTC" if frees else ""),
                table=table_name(name),
                reason=f"Data Tap request budget spent ({self.per_hour} per hour)",
            )
        self.sent.append(self.now())
        self.spent += 1


def table_name(name: str) -> str:
    """`data_tap__<name>`; names are lower-case identifiers so the table name is predictable."""
    if not _NAME.match(name):
        raise DataTapError(
            f"Data Tap query name {name!r} must be a lower-case identifier ([a-z][a-z0-9_]*)"
        )
    return f"data_tap__{name}"


def _content(body: Any) -> dict[str, Any]:
    content = body.get("content", body) if isinstance(body, dict) else None
    if not isinstance(content, dict):
        raise DataTapError(f"unexpected Data Tap answer: {type(body).__name__}")
    return content


def run_query(
    client: EsperClient,
    name: str,
    sql: str,
    *,
    deadline_s: float,
    stuck_s: float,
    row_limit: int,
    poll_s: tuple[float, ...] = DATA_TAP_POLL_S,
    budget: RequestBudget | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Submit a query once and poll it (waits `poll_s`, the last repeated) until it ends.

    Returns:
        The finished job's content (status SUCCEEDED).

    Raises:
        DataTapError: FAILED/CANCELED/CLOSED, a truncated result, or the deadline passed.
        EsperUnavailableError: the tenant's quota refused a request, or `budget` is spent.
    """
    payload = {"query": sql, "is_download": False, "row_limit": row_limit, "latest_data": True}
    budget = budget or RequestBudget(DATA_TAP_REQUESTS_PER_HOUR)
    started = clock()
    budget.spend(name, needed=2)  # a submission is worth sending only with a poll left
    # Sent once: a second submission is a second job that spends the tenant's quota again.
    job = _content(_call(name, lambda: client.post(DATA_TAP_PATH, payload, retry=False)))
    job_id = job.get("id")
    if not job_id:
        raise DataTapError(f"Data Tap query {name!r}: the submission answered no job id")
    polls, job_path = 0, f"{DATA_TAP_PATH}/{job_id}"
    while True:
        status = str(job.get("status") or "PENDING").upper()
        if status == "SUCCEEDED":
            result = job.get("result")
            if result is None:  # the live API's answer for zero rows
                return job
            if result.get("truncated"):
                rows = len(result.get("data_array") or [])
                raise DataTapError(
                    f"Data Tap query {name!r} returned a truncated result ({rows} rows at "
                    f"row limit {row_limit}): nothing was loaded; narrow the query or raise "
                    "data_tap_row_limit"
                )
            return job
        if status in _FAILED:
            reason = job.get("error_message") or "the API gave no reason"
            if status == "CLOSED":
                reason = f"the job was closed before its result was read ({reason})"
            raise DataTapError(f"Data Tap query {name!r} ended {status}: {reason}")
        waited = clock() - started
        if waited > deadline_s:
            raise DataTapError(
                f"Data Tap query {name!r} still {status} after {deadline_s:.0f} s "
                f"({polls} poll(s) of job {job_id}): giving up"
            )
        if waited > stuck_s:
            log.warning("Data Tap query %r still %s after %.0f s", name, status, waited)
        sleep(poll_s[min(polls, len(poll_s) - 1)])
        polls += 1
        budget.spend(name)
        job = _content(_call(name, functools.partial(client.get, job_path)))


def _call(name: str, request: Callable[[], Any]) -> Any:
    """One Data Tap request; a quota refusal (429) makes the table unavailable for this run."""
    try:
        return request()
    except EsperAPIError as error:
        if error.status != 429:
            raise
        match = _QUOTA.search(str(error))
        quoted = match.group(0).strip() if match else str(error)
        raise EsperUnavailableError(
            f"Data Tap query {name!r} refused by the tenant's quota: {quoted}",
            table=table_name(name),
            reason=f"Data Tap quota spent: {quoted}",
            status=429,
            route=error.route,
        ) from error


def result_to_arrow(name: str, job: Mapping[str, Any]) -> pa.Table:
    """The result rows typed from the result's own schema (through polars)."""
    import polars as pl  # here, not at the top: see _TYPES

    result = job.get("result")
    if result is None:
        return pa.table({})
    columns = sorted(
        (result.get("schema") or {}).get("columns") or [], key=lambda c: c.get("position", 0)
    )
    if not columns:
        raise DataTapError(f"Data Tap query {name!r}: the result has no schema")
    names = [c["name"] for c in columns]
    rows = result.get("data_array") or []
    frame = pl.DataFrame(
        [[None if v is None else str(v) for v in row] for row in rows] or None,
        schema=[(n, pl.Utf8) for n in names],
        orient="row",
    )
    casts = []
    for column in columns:
        target = _TYPES.get(str(column.get("type_name") or "STRING").upper(), "Utf8")
        expr = pl.col(column["name"])
        if target.startswith("Datetime"):
            expr = expr.str.to_datetime(
                time_zone="UTC" if target.endswith("UTC") else None, strict=True
            )
        elif target == "Date":
            expr = expr.str.to_date(strict=True)
        elif target == "Boolean":
            expr = expr.str.to_lowercase() == "true"
        else:
            expr = expr.cast(getattr(pl, target)(), strict=True)
        casts.append(expr.alias(column["name"]))
    return frame.select(casts).to_arrow()


def bind_cursor(sql: str, spec: Mapping[str, Any], last: Any) -> str:
    """The SQL with `{cursor}` replaced by the last loaded cursor value minus `lag_days`."""
    if last is None:
        return sql.replace("{cursor}", "DATE'1970-01-01'")
    day = date.fromisoformat(str(last)[:10]) - timedelta(days=int(spec.get("lag_days", 0)))
    return sql.replace("{cursor}", f"DATE'{day.isoformat()}'")


def _source_state() -> dict[str, Any] | None:
    """dlt's source state inside a pipeline run; None when a resource is iterated by hand."""
    try:
        return dlt.current.source_state()
    except Exception:  # no pipeline context (a unit test iterating the resource)
        return None


def data_tap_resources(
    client: EsperClient,
    queries: Mapping[str, str | Mapping[str, Any]],
    *,
    requests_per_hour: int = DATA_TAP_REQUESTS_PER_HOUR,
    ledger: Any = None,
    now: Callable[[], float] = time.time,
    **options: Any,
) -> list[DltResource]:
    """One `data_tap__<name>` resource per configured query, run one at a time.

    A query is SQL (a snapshot: its table replaced each run) or a table `{sql, cursor, key,
    lag_days}` (incremental: `{cursor}` in the SQL is bound to the last loaded cursor value minus
    `lag_days`, the rows merged on `key`, earlier rows kept; the cursor lives in resource state).

    A query that cannot be answered (quota refusal, spent budget, FAILED/CANCELED/CLOSED job,
    truncated result, deadline) skips its table: recorded in `ledger` (the run ends partial),
    or raised when there is no ledger. After a quota refusal or a spent budget no further query
    is sent in the run.
    """
    refused: list[str] = []
    budget = RequestBudget(requests_per_hour, now)

    def answer(name: str, spec: Mapping[str, Any]) -> Iterator[pa.Table]:
        if refused:  # a quota refusal or a spent budget ends Data Tap for the run
            raise EsperUnavailableError(
                f"Data Tap query {name!r} not submitted: {refused[0]}",
                table=table_name(name),
                reason=f"not submitted after: {refused[0]}",
            )
        state = _source_state()
        if state is not None:
            budget.attach(state)
        cursor = spec.get("cursor")
        last = dlt.current.resource_state().get("last_value") if cursor else None
        sql = bind_cursor(spec["sql"], spec, last) if cursor else spec["sql"]
        try:
            job = run_query(client, name, sql, budget=budget, **options)
        except EsperUnavailableError as error:
            refused.append(str(error))
            raise
        table = result_to_arrow(name, job)
        if not table.num_columns:
            return
        if cursor and table.num_rows:
            values = [v for v in table.column(cursor).to_pylist() if v is not None]
            if values:
                dlt.current.resource_state()["last_value"] = str(max(values))
        yield table

    def loader(name: str, spec: Mapping[str, Any]) -> Callable[[], Iterator[pa.Table]]:
        def load() -> Iterator[pa.Table]:
            try:
                yield from answer(name, spec)
            except (EsperUnavailableError, DataTapError) as error:
                if ledger is None:
                    raise
                if not isinstance(error, EsperUnavailableError):
                    error = EsperUnavailableError(
                        str(error), table=table_name(name), reason=str(error)
                    )
                ledger.mark_unavailable(table_name(name), error)
                keep_what_was_loaded()

        return load

    specs = {n: {"sql": q} if isinstance(q, str) else dict(q) for n, q in queries.items()}
    return [dlt.resource(loader(n, spec), **_hints(n, spec)) for n, spec in specs.items()]


def _hints(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot query replaces its table; an incremental one merges on its key."""
    if not spec.get("cursor"):
        return {"name": table_name(name), "write_disposition": "replace"}
    key = spec.get("key") or [spec["cursor"]]
    primary_key = [key] if isinstance(key, str) else list(key)
    return {"name": table_name(name), "write_disposition": "merge", "primary_key": primary_key}
