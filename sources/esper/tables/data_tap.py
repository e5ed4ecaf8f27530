"""Data Tap queries: named SQL from configuration, each loaded into its own `data_tap__<name>` table.

A job (submitted once, polled, within the tenant's quota and the run's request budget) and its
result's conversion: `data_tap_jobs.py`.

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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.extract.resource import DltResource

from ..common import keep_what_was_loaded
from ..http import EsperClient, EsperUnavailableError
from ..run.ledger import RunLedger
from ..settings import EsperSourceConfiguration as Settings
from .data_tap_jobs import (
    DataTapError,
    DataTapQuotaError,
    RequestBudget,
    request_log,
    result_to_arrow,
    run_query,
    table_name,
)

log = logging.getLogger("esper_warehouse.source")

# `lag_days` of an incremental query that names none. Data Tap answers with `latest_data` (the
# newest data, as this source asks): the newest `report_date` is the day in progress, read part
# way through, and its late rows arrive after the run. Binding the cursor one day back reads that
# day again, whole, on the next run (0 would keep its partial rows for good).
DEFAULT_LAG_DAYS = 1
# What `{cursor}` becomes on an incremental query's first run unless its `start` says otherwise.
FIRST_CURSOR = "DATE'1970-01-01'"


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
    requests_per_hour: int = Settings.data_tap_requests_per_hour,
    ledger: RunLedger | None = None,
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
    read whole (`Scans.add`): each key of the result must be in the warehouse, once.
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
                    ledger.scans.add(table_name(name), len(rows), rows, query.key)
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
                ledger.refusals.mark_unavailable(table_name(name), error)
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
