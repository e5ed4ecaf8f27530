"""Data Tap queries: named SQL from configuration, each loaded into its own `data_tap__<name>` table.

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

What ends what:
- a quota refusal (429, on a submission or a poll) or a spent budget skips the query and ends
  Data Tap for the run: no later query is sent;
- a submission that fails (5xx, timeout, dropped connection, refused), a failed, canceled,
  closed, truncated or late job, or a result that cannot be loaded as declared (a missing key or
  cursor column, a NULL in one, a cell that does not read as its column's type) skips that query
  only; the next query is sent.
Either way the run ends partial (exit 6) and every other table loads.

Incremental queries (`{sql, cursor, key, lag_days}`, `data_tap_resources`): the rules for cursor
types, the lag, duplicate keys and a changed query are in `Incremental`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dlt
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from dlt.extract.resource import DltResource

from ..common import keep_what_was_loaded
from ..http import EsperAPIError, EsperClient, EsperConfigError, EsperError, EsperUnavailableError
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


# `lag_days` of an incremental query that names none. Data Tap answers with `latest_data` (the
# newest data, as this source asks): the newest `report_date` is the day in progress, read part
# way through, and its late rows arrive after the run. Binding the cursor one day back reads that
# day again, whole, on the next run (0 would keep its partial rows for good).
DEFAULT_LAG_DAYS = 1
# What `{cursor}` becomes on an incremental query's first run unless its `start` says otherwise.
FIRST_CURSOR = "DATE'1970-01-01'"
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
    poll_s: tuple[float, ...] = DATA_TAP_POLL_S,
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
    budget = budget or RequestBudget(DATA_TAP_REQUESTS_PER_HOUR)
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


@dataclass(frozen=True)
class Incremental:
    """An incremental query `{sql, cursor, key, lag_days, start}`, and the rules it is loaded by.

    - Cursor: any sortable column the result types as a number, a date, a timestamp or text.
      `{cursor}` in the SQL becomes the newest loaded value as a literal of its type: a number as
      is, `DATE'…'` and `TIMESTAMP'…'` minus `lag_days` (default `DEFAULT_LAG_DAYS`), text quoted
      (numbers and text have no lag). The first run binds `start` (SQL; default
      `DATE'1970-01-01'`: a number cursor needs e.g. `start = 0`).
    - Rows: a result without the key or cursor column, or with a NULL in one, is not loaded
      (skipped, named); rows are merged on the key (default: the cursor).
    - One key twice in one result: the row with the newest cursor is kept (on a tie, the later in
      the result), on the first load and later alike.
    - A changed query: the SQL, the cursor and the key are fingerprinted in the table's state; a
      new SQL text or cursor starts the cursor over (everything the new query serves is read and
      merged: earlier rows stay); a new key (or a query that was a snapshot) replaces the table by
      the new query's whole result. Both are said in the log.
    """

    name: str
    sql: str
    cursor: str
    key: tuple[str, ...]
    lag_days: float = DEFAULT_LAG_DAYS
    start: str = FIRST_CURSOR

    @classmethod
    def of(cls, name: str, spec: Mapping[str, Any]) -> Incremental:
        key = spec.get("key") or [spec["cursor"]]
        lag, start = spec.get("lag_days"), spec.get("start")
        return cls(
            name,
            spec["sql"],
            spec["cursor"],
            (key,) if isinstance(key, str) else tuple(key),
            DEFAULT_LAG_DAYS if lag is None else float(lag),
            FIRST_CURSOR if start is None else str(start),
        )

    def bind(self, last: Any) -> str:
        """The SQL with `{cursor}` replaced by a literal: see the class.

        `last`: the stored cursor (`{"value", "type"}`; a bare value was a date, stored before
        cursors had types), or None on a first run.
        """
        if last is None:
            return self.sql.replace("{cursor}", self.start)
        stored = last if isinstance(last, Mapping) else {"value": last, "type": "date"}
        return self.sql.replace("{cursor}", cursor_literal(stored, self.lag_days))

    def check(self, table: pa.Table) -> pa.Table:
        """The result's rows, one per key (see the class).

        Raises:
            DataTapError: the key or cursor column is missing, or holds NULLs.
        """
        problems = []
        for column in dict.fromkeys((*self.key, self.cursor)):
            role = "cursor" if column == self.cursor else "key"
            if column not in table.column_names:
                problems.append(f"no column {column!r} (its {role})")
            elif nulls := table.column(column).null_count:
                problems.append(f"{nulls} row(s) with NULL in {column!r} (its {role})")
        if problems:
            raise DataTapError(
                f"Data Tap query {self.name!r}: the result has {', '.join(problems)}; columns: "
                f"{', '.join(table.column_names)}; nothing of the result was loaded"
            )
        kept = _newest_per_key(table, self.key, self.cursor)
        if dropped := table.num_rows - kept.num_rows:
            log.warning(
                "Data Tap query %r: %d row(s) repeat the key (%s) of another row of the result; "
                "kept the row with the newest %s per key",
                self.name,
                dropped,
                ", ".join(self.key),
                self.cursor,
            )
        return kept

    def newest(self, table: pa.Table) -> dict[str, Any] | None:
        """The cursor to store: the newest value of the result, and its type.

        Raises:
            DataTapError: the cursor column's type does not order rows (e.g. a boolean).
        """
        if not table.num_rows:
            return None
        column = table.column(self.cursor)
        kind = _cursor_kind(column.type)
        if kind is None:
            raise DataTapError(
                f"Data Tap query {self.name!r}: its cursor {self.cursor!r} is {column.type}, "
                "which does not order rows: choose a number, date, timestamp or text column"
            )
        value = pc.max(column).as_py()
        return {
            "value": value.isoformat() if kind in ("date", "timestamp") else value,
            "type": kind,
        }

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the query for its table: the SQL's digest, the cursor, the key."""
        return {"sql": _digest(self.sql), "cursor": self.cursor, "key": list(self.key)}


def _digest(sql: str) -> str:
    return hashlib.sha256(sql.strip().encode()).hexdigest()[:16]


def _cursor_kind(kind: pa.DataType) -> str | None:
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    return None


def cursor_literal(last: Mapping[str, Any], lag_days: float) -> str:
    """The SQL literal (Spark) of a stored cursor `{"value", "type"}`, minus the lag if a time."""
    kind, value = last.get("type", "date"), last["value"]
    lag = timedelta(days=lag_days)
    if kind == "number":
        return repr(value) if isinstance(value, float) else str(int(value))
    if kind == "timestamp":
        moment = datetime.fromisoformat(str(value)) - lag
        zone = "+00:00" if moment.tzinfo else ""
        if moment.tzinfo:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return f"TIMESTAMP'{moment.isoformat(sep=' ', timespec='microseconds')}{zone}'"
    if kind == "text":
        escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
        return f"'{escaped}'"
    day = date.fromisoformat(str(value)[:10]) - lag
    return f"DATE'{day.isoformat()}'"


def _newest_per_key(table: pa.Table, key: Sequence[str], cursor: str) -> pa.Table:
    """One row per key: the newest cursor's, the later in the result on a tie (result order kept)."""
    if table.num_rows < 2:
        return table
    ranked = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    ranked = ranked.sort_by([(cursor, "ascending"), ("__row", "ascending")])
    ranked = ranked.append_column("__rank", pa.array(range(ranked.num_rows), pa.int64()))
    newest = ranked.group_by(list(key), use_threads=False).aggregate([("__rank", "max")])
    keep = pc.is_in(ranked.column("__rank"), value_set=newest.column("__rank_max"))
    return ranked.filter(keep).sort_by("__row").drop_columns(["__row", "__rank"])


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
    lag_days}` (incremental, `Incremental`: rows merged on `key`, earlier rows kept; the cursor
    and the query's fingerprint live in resource state, committed with the rows).

    A query that cannot be answered or loaded skips its table: recorded in `ledger` (the run ends
    partial), or raised when there is no ledger. After a quota refusal or a spent budget no
    further query is sent in the run. An incremental query's rows are reconciled like any list
    read whole (`ledger.add_scan`): each key of the result must be in the warehouse, once.
    """
    refused: list[str] = []
    budget = RequestBudget(requests_per_hour, now)

    def answer(name: str, spec: Mapping[str, Any]) -> Iterator[pa.Table]:
        if refused:  # a quota refusal or a spent budget ends Data Tap for the run
            raise DataTapQuotaError(
                f"Data Tap query {name!r} not submitted: {refused[0]}",
                table=table_name(name),
                reason=f"not submitted after: {refused[0]}",
            )
        source_state = _source_state()
        if source_state is not None:
            budget.attach(request_log(), source_state)
        state = dlt.current.resource_state() if source_state is not None else {}
        query = Incremental.of(name, spec) if spec.get("cursor") else None
        fingerprint = (
            query.fingerprint()
            if query
            else {"sql": _digest(spec["sql"]), "cursor": None, "key": []}
        )
        change = _changed(name, state, fingerprint)
        last = None if change else state.get("last_value")  # a changed query starts over
        sql = query.bind(last) if query else spec["sql"]
        try:
            job = run_query(client, name, sql, budget=budget, **options)
        except DataTapQuotaError as error:
            refused.append(str(error))
            raise
        table = result_to_arrow(name, job)
        if query is not None:  # state is changed only once the result is known to load
            if table.num_columns:
                table = query.check(table)
                if ledger is not None:
                    rows = table.select(list(query.key)).to_pylist()
                    ledger.add_scan(table_name(name), len(rows), rows, query.key)
            state["last_value"] = (query.newest(table) if table.num_columns else None) or last
        if change == "key":  # merging on another key would mix two tables in one
            dlt.current.resource().apply_hints(write_disposition="replace")
        state["query"] = fingerprint
        if table.num_columns:
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


def _changed(name: str, state: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """How the query changed since its table was last loaded: "key", "query" or None (logged).

    "key": another key or cursor-less mode (the table is replaced); "query": another SQL text or
    cursor (the cursor starts over). A table loaded before fingerprints were kept is taken as
    unchanged.
    """
    before = state.get("query")
    if before is None or dict(before) == dict(now):
        return None
    if before.get("cursor") is None and now["cursor"] is None:  # a snapshot: replaced anyway
        return None
    table = table_name(name)
    if list(before.get("key") or []) != list(now["key"]):
        log.warning(
            "Data Tap query %r changed its key (%s -> %s): %s starts afresh, replaced by the new "
            "query's whole result",
            name,
            ", ".join(before.get("key") or []) or "none: a snapshot",
            ", ".join(now["key"]) or "none: a snapshot",
            table,
        )
        return "key"
    what = "cursor" if before.get("cursor") != now["cursor"] else "SQL"
    log.warning(
        "Data Tap query %r changed its %s since %s was loaded: its cursor starts over; every row "
        "the new query serves is read and merged on its key, earlier rows stay",
        name,
        what,
        table,
    )
    return "query"


def _hints(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot query replaces its table; an incremental one merges on its key."""
    if not spec.get("cursor"):
        return {"name": table_name(name), "write_disposition": "replace"}
    query = Incremental.of(name, spec)
    return {"name": table_name(name), "write_disposition": "merge", "primary_key": list(query.key)}
