"""Data Tap jobs: submitting a query, polling it, the tenant's quota, and reading its result.

The shape is Esper's Query API documentation (docs/spec/live-observations.md section 15; no live
sample exists), held in this module only: `POST /data-tap/v0/queries {query, is_download,
row_limit, latest_data}` answers `{content: {id, status, ...}}`; `GET /data-tap/v0/queries/{id}`
(no trailing slash) answers `{content: {status, result, error_message}}` with `result` null or
`{schema: {columns: [{name, position, type_name}]}, data_array, truncated}` and status PENDING,
RUNNING, SUCCEEDED, FAILED, CANCELED or CLOSED. Waiting for a job is polling, not an HTTP retry:
the client still owns every request's retries; this module owns how long to wait for the job.

Data Tap's quota is the tenant's (live-observations section 18), so this module is a careful
guest: one query at a time, every request sent once (a submission is never re-sent after a failed
or uncertain answer; a failed poll is followed by the next poll, not by a retry), polls wait 10,
20, then 30 s (`data_tap_poll_s`), and every request (submissions and polls) is counted against
`data_tap_requests_per_hour` over a rolling hour that spans runs: its time is written beside the
warehouse before it is sent (`RequestBudget`), so a run that fails or is killed still counts.
The tables the results load into, and what ends what: `data_tap.py`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dlt
import orjson
import pyarrow as pa

from ..http import EsperAPIError, EsperClient, EsperConfigError, EsperError, EsperUnavailableError
from ..http.policy import clip
from ..run.state import DATA_TAP_REQUESTS
from ..settings import EsperSourceConfiguration as Settings

log = logging.getLogger("esper_warehouse.source")

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


# How much of a cell a skip message quotes (a value, never a whole row).
_QUOTED = 40


class DataTapError(EsperError):
    """A Data Tap query failed, was truncated, did not finish, or its result cannot be loaded."""


class DataTapQuotaError(EsperUnavailableError):
    """The tenant's quota refused a Data Tap request, or this tool's budget is spent: no further
    Data Tap request is sent in the run."""


class RequestBudget:
    """Data Tap requests per rolling hour, submissions and polls alike, across runs.

    Each request's time is written to `path` (a small JSON file beside the warehouse, replaced
    atomically) before the request is sent: a run that fails, or is killed, still counts what it
    sent, and the next run sees it. Without a path (a resource iterated outside a pipeline) the
    count is this process's only.

    Args:
        per_hour: the most requests any hour may hold (`data_tap_requests_per_hour`).
        now: wall-clock seconds (the quota is the server's, over real time).
    """

    def __init__(self, per_hour: int, now: Callable[[], float] = time.time) -> None:
        self.per_hour, self.now = per_hour, now
        self.sent: list[float] = []
        self.spent = 0  # requests this run
        self.path: Path | None = None

    def attach(self, path: Path | None, state: dict[str, Any] | None = None) -> None:
        """Count the requests written at `path` (and, once, those of a warehouse whose source
        state kept them, before the file existed) from now on."""
        if path is not None and path != self.path:
            self.path = path
            self.sent = sorted({*self.sent, *_read_times(path)})
        if state is not None and DATA_TAP_REQUESTS in state:
            self.sent = sorted({*self.sent, *state.pop(DATA_TAP_REQUESTS)})
            self._save()

    def left(self) -> int:
        """Requests the rolling hour still allows."""
        cutoff = self.now() - _HOUR_S
        self.sent[:] = [t for t in self.sent if t > cutoff]
        return self.per_hour - len(self.sent)

    def spend(self, name: str, needed: int = 1) -> None:
        """Count one request, after checking that `needed` are left; written before it is sent.

        Raises:
            DataTapQuotaError: the budget is spent; the message says when a request frees up.
        """
        if self.left() < needed:
            frees = datetime.fromtimestamp(min(self.sent) + _HOUR_S, UTC) if self.sent else None
            raise DataTapQuotaError(
                f"Data Tap query {name!r} not sent: the request budget of {self.per_hour} per "
                "hour (data_tap_requests_per_hour) is spent"
                + (f" until {frees:%H:%M} UTC" if frees else ""),
                table=table_name(name),
                reason=f"Data Tap request budget spent ({self.per_hour} per hour)",
            )
        self.sent.append(self.now())
        self.spent += 1
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_bytes(orjson.dumps(self.sent))
        partial.replace(self.path)


def _read_times(path: Path) -> list[float]:
    """The request times written at `path`; none when there is no file (or it cannot be read)."""
    try:
        times = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, orjson.JSONDecodeError) as error:
        log.warning("Data Tap request log %s unreadable (%s): counting from now", path, error)
        return []
    if not isinstance(times, list):
        return []
    return [float(t) for t in times if isinstance(t, int | float) and not isinstance(t, bool)]


def request_log() -> Path:
    """Where the running pipeline writes its Data Tap request times: beside the warehouse, in
    the folder of dlt's working directories (one file per pipeline, i.e. per tenant)."""
    pipeline = dlt.current.pipeline()
    return Path(pipeline.pipelines_dir) / f"{pipeline.pipeline_name}.data_tap_requests.json"


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
    poll_s: tuple[float, ...] = Settings.data_tap_poll_s,
    budget: RequestBudget | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Submit a query once and poll it (waits `poll_s`, the last repeated) until it ends.

    Every request is sent once (`retry=False`): a failed submission skips the query (a second
    one would be a second job, paid again); a poll that fails (5xx, timeout, dropped) is counted
    and followed by the next poll at its usual wait, up to `deadline_s`.

    Returns:
        The finished job's content (status SUCCEEDED).

    Raises:
        DataTapError: the submission failed, FAILED/CANCELED/CLOSED, a truncated result, a poll
            refused (4xx), or the deadline passed.
        DataTapQuotaError: the tenant's quota refused a request (429), or `budget` is spent.
    """
    payload = {"query": sql, "is_download": False, "row_limit": row_limit, "latest_data": True}
    budget = budget or RequestBudget(Settings.data_tap_requests_per_hour)
    started = clock()
    budget.spend(name, needed=2)  # a submission is worth sending only with a poll left
    try:
        job = _content(_call(name, lambda: client.post(DATA_TAP_PATH, payload, retry=False)))
    except (DataTapQuotaError, EsperConfigError):
        raise
    except EsperError as error:
        raise DataTapError(
            f"Data Tap query {name!r}: its submission failed ({error}); not re-sent (the job may "
            "have started on Esper's side: a second submission would be a second job)"
        ) from error
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
            # the server's text, for logs and the run record: the key out first, then cut
            reason = clip(str(job.get("error_message") or ""), 300, client.redact)
            reason = reason or "the API gave no reason"
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
        job = _poll(name, client, job_path) or job


def _poll(name: str, client: EsperClient, job_path: str) -> dict[str, Any] | None:
    """One status read, sent once; None when it failed in a way the next poll may not (5xx,
    timeout, dropped connection, a body that is not JSON)."""
    try:
        return _content(_call(name, lambda: client.get(job_path, retry=False)))
    except (DataTapQuotaError, EsperConfigError):
        raise
    except EsperError as error:
        if error.status is not None and 400 <= error.status < 500:  # refused: asking again is vain
            raise DataTapError(
                f"Data Tap query {name!r}: polling its job failed ({error})"
            ) from error
        log.warning(
            "Data Tap query %r: a poll failed (%s); polling again at the next wait", name, error
        )
        return None


def _call(name: str, request: Callable[[], Any]) -> Any:
    """One Data Tap request; a quota refusal (429) ends Data Tap for this run."""
    try:
        return request()
    except EsperAPIError as error:
        if error.status != 429:
            raise
        match = _QUOTA.search(str(error))
        quoted = match.group(0).strip() if match else str(error)
        raise DataTapQuotaError(
            f"Data Tap query {name!r} refused by the tenant's quota: {quoted}",
            table=table_name(name),
            reason=f"Data Tap quota spent: {quoted}",
            status=429,
            route=error.route,
        ) from error


def result_to_arrow(name: str, job: Mapping[str, Any]) -> pa.Table:
    """The result rows typed from the result's own schema (through polars).

    Raises:
        DataTapError: cells that do not read as their column's declared type (a column, how many
            cells, and the first one quoted): the result is not what it says, nothing of it is
            loaded.
    """
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
                time_zone="UTC" if target.endswith("UTC") else None, strict=False
            )
        elif target == "Date":
            expr = expr.str.to_date(strict=False)
        elif target == "Boolean":
            text = expr.str.to_lowercase()
            expr = pl.when(text == "true").then(True).when(text == "false").then(False)
        else:
            expr = expr.str.strip_chars().cast(getattr(pl, target)(), strict=False)
        casts.append(expr.alias(column["name"]))
    typed = frame.select(casts)
    unreadable = []
    for column in columns:
        lost = frame[column["name"]].is_not_null() & typed[column["name"]].is_null()
        if count := int(lost.sum()):
            first = str(frame[column["name"]].filter(lost)[0])[:_QUOTED]
            unreadable.append(
                f"{column['name']} ({column.get('type_name')}): {count} cell(s), e.g. {first!r}"
            )
    if unreadable:
        raise DataTapError(
            f"Data Tap query {name!r}: cells that do not read as their column's type: "
            f"{'; '.join(unreadable)}; nothing of the result was loaded"
        )
    return typed.to_arrow()
