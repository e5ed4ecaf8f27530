"""Data Tap queries: named SQL from configuration, each loaded into its own `data_tap__<name>` table.

The shape is Esper's Query API documentation (docs/spec/live-observations.md section 15; no live
sample exists), held in this module only: `POST /data-tap/v0/queries {query, is_download,
row_limit, latest_data}` answers `{content: {id, status, ...}}`; `GET /data-tap/v0/queries/{id}`
(no trailing slash) answers `{content: {status, result, error_message}}` with `result` null or
`{schema: {columns: [{name, position, type_name}]}, data_array, truncated}` and status PENDING,
RUNNING, SUCCEEDED, FAILED, CANCELED or CLOSED. Waiting for a job is polling, not an HTTP retry:
the client still owns every request's retries; this module owns how long to wait for the job.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import date, timedelta
from typing import Any

import dlt
import pyarrow as pa
from dlt.extract.resource import DltResource

from .client import EsperAPIError, EsperClient, EsperError, EsperUnavailableError
from .settings import DATA_TAP_PATH

log = logging.getLogger("esper_warehouse.source")

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,50}$")
_WAITING = {"PENDING", "RUNNING", "QUEUED"}
_POLLS_S = (10.0, 20.0, 30.0)  # waits before the 1st, 2nd, 3rd poll; then every 30 s
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
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Submit a query and wait for its result; resubmit a job stuck waiting for `stuck_s`.

    Returns:
        The finished job's content (status SUCCEEDED).

    Raises:
        DataTapError: FAILED/CANCELED, a truncated result, or the deadline passed.
    """
    payload = {"query": sql, "is_download": False, "row_limit": row_limit, "latest_data": True}
    started = clock()
    submissions = 0
    while True:
        job = _content(_call(name, lambda: client.post(DATA_TAP_PATH, payload, retry=False)))
        job_id, submissions, submitted = job.get("id"), submissions + 1, clock()
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
            now = clock()
            if now - started > deadline_s:
                raise DataTapError(
                    f"Data Tap query {name!r} still {status} after {deadline_s:.0f} s "
                    f"({submissions} submission(s)): giving up"
                )
            if now - submitted > stuck_s:
                log.warning("Data Tap query %r stuck in %s for %.0f s", name, status, stuck_s)
            sleep(_POLLS_S[min(polls, len(_POLLS_S) - 1)])
            polls += 1
            job = _content(_call(name, functools.partial(client.get, job_path)))


def _call(name: str, request: Callable[[], Any]) -> Any:
    """One Data Tap request; a quota refusal (429) makes the table unavailable for this run."""
    try:
        return request()
    except EsperAPIError as error:
        if error.status != 429:
            raise
        match = _QUOTA.search(str(error))
        raise EsperUnavailableError(
            f"Data Tap query {name!r} refused by the tenant's quota: "
            f"{match.group(0).strip() if match else error}",
            table=table_name(name),
            reason="Data Tap quota spent",
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


def data_tap_resources(
    client: EsperClient, queries: Mapping[str, str | Mapping[str, Any]], **options: Any
) -> list[DltResource]:
    """One `data_tap__<name>` resource per configured query.

    A query is SQL (a snapshot: its table replaced each run) or a table `{sql, cursor, key,
    lag_days}` (incremental: `{cursor}` in the SQL is bound to the last loaded cursor value minus
    `lag_days`, the rows merged on `key`, earlier rows kept; the cursor lives in resource state).
    """
    refused: list[str] = []

    def loader(name: str, spec: Mapping[str, Any]) -> Callable[[], Iterator[pa.Table]]:
        def load() -> Iterator[pa.Table]:
            if refused:  # one quota refusal ends Data Tap for the run: no further submissions
                raise EsperUnavailableError(
                    f"Data Tap query {name!r} not submitted: {refused[0]}",
                    table=table_name(name),
                    reason="Data Tap quota spent",
                    status=429,
                )
            cursor = spec.get("cursor")
            state = dlt.current.resource_state() if cursor else {}
            sql = bind_cursor(spec["sql"], spec, state.get("last_value")) if cursor else spec["sql"]
            try:
                table = result_to_arrow(name, run_query(client, name, sql, **options))
            except EsperUnavailableError as error:
                refused.append(str(error))
                raise
            if not table.num_columns:
                return
            if cursor and table.num_rows:
                values = [v for v in table.column(cursor).to_pylist() if v is not None]
                if values:
                    state["last_value"] = str(max(values))
            yield table

        return load

    resources = []
    for name, query in queries.items():
        spec = {"sql": query} if isinstance(query, str) else dict(query)
        if spec.get("cursor"):
            key = spec.get("key") or [spec["cursor"]]
            resource = dlt.resource(
                loader(name, spec),
                name=table_name(name),
                write_disposition="merge",
                primary_key=[key] if isinstance(key, str) else list(key),
            )
        else:
            resource = dlt.resource(
                loader(name, spec), name=table_name(name), write_disposition="replace"
            )
        resources.append(resource)
    return resources
