"""Data Tap: SQL queries over the simulator's daily snapshot tables, run for real in DuckDB.

The shape follows Esper's Query API documentation (docs/spec/live-observations.md section 15,
``live-shapes.json`` ``docs_only``; no live sample exists):

- ``POST /data-tap/v0/queries`` with ``{query (required), is_download, row_limit, latest_data}``
  answers 201 ``{"content": {id, tenant_id, user_id, query, created_at, updated_at, is_download,
  row_limit, latest_data, status: "PENDING", result: null}}``.
- ``GET /data-tap/v0/queries/{id}`` (no trailing slash) answers ``{"content": {..., status,
  result, error_message}}``: PENDING on the first poll, RUNNING on the second, then SUCCEEDED
  with ``result: {schema: {column_count, columns[{name, position, type_name, type_text}]},
  data_array: [[str, ...]], truncated}`` (cells as strings, as in the documented sample), or
  FAILED with ``result: null`` and the reason in ``error_message``. A job polled again after it
  finished answers CLOSED (its result is gone). A query the ``query_canceled`` fault cancels
  answers CANCELED (no result, no error message).
- Errors use the Reports family body ``{status, error, message}``.

Tables (one row per entity per ``report_date``, captured at each simulated midnight for the
last week of history and every day after ``start``; every table also carries
``report_generation_timestamp``), in the columns and types the live client relied on
(live-observations section 19):

- ``devices``: ``state`` is the provisioning state as text (``PROVISIONED``; the codes' other
  phases as ``DISABLED``, ``ONBOARDING``, ... — an inference: only ``PROVISIONED`` was seen),
  ``last_seen`` is text (``try_cast(last_seen as timestamp)``), ``hardware_info`` JSON text; no
  status or battery column.
- ``device_stats``: ``battery_level``, ``latitude``, ``longitude`` as text to cast; JSON-text
  ``memory_stats`` (``units: 'BYTE'``), ``battery_stats``, ``network_stats``,
  ``location_stats``; no CPU figure.
- ``device_apps``: ``version_name``, ``version_code``, ``package_name``, ``app_name``.
- ``groups``: ``group_id``, ``group_name``, ``path``, ``parent_id``, ``device_count``.
- ``users``: ``user_id`` and ``role_name`` (no display names).

Queries are Spark SQL (``get_json_object``, ``try_cast``, ``interval 30 minutes``, backticks),
translated to DuckDB with sqlglot; a double-quoted identifier fails the job, as live. With
``latest_data: true`` a snapshot of the current state is added first.

The package: ``tables`` (DDL and the daily snapshot), ``dialect`` (Spark SQL to DuckDB, result
types and cells) and, here, :class:`DataTap` (snapshots, DuckDB, jobs and their polls). The
routes that parse the requests are in ``simulator/routes/reports.py``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from esper_warehouse.simulator.datatap.dialect import cell_value, column_type, spark_to_duckdb
from esper_warehouse.simulator.datatap.tables import DDL, snapshot_tables
from esper_warehouse.simulator.fleet import DAY, new_id
from esper_warehouse.simulator.http import ApiError
from esper_warehouse.simulator.timeutil import iso

if TYPE_CHECKING:
    from esper_warehouse.simulator.state import World

# A finished job answers its result this many polls at most, then CLOSED (the result expired).
CLOSED_AFTER_POLLS = 6


@dataclass(slots=True)
class Job:
    """A submitted query and what its polls reveal."""

    id: str
    query: str
    created: int
    polls: int = 0
    columns: list[dict[str, Any]] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    row_limit: int = 0
    latest: bool = False
    canceled: bool = False
    submitted_at: float = field(default_factory=time.monotonic)  # wall clock (job_seconds)


class DataTap:
    """Snapshot store, DuckDB database and query jobs of one world."""

    def __init__(self, world: World, keep_from: int) -> None:
        self.world = world
        self.keep_from = keep_from
        self.pending: list[tuple[int, dict[str, pa.Table]]] = []
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.con = duckdb.connect(config={"enable_external_access": False, "threads": 1})
        self.con.execute(DDL)
        # The tenant's Data Tap quota (live: 25 requests per hour, submissions and polls alike,
        # answered 429 without Retry-After); None: no quota. Wall-clock seconds of each request.
        self.quota_per_hour: int | None = None
        # Wall-clock seconds a job runs before it ends; None: it ends at its third poll.
        self.job_seconds: float | None = None
        self.spent: list[float] = []

    def spend(self) -> None:
        """Count one Data Tap request against the hourly quota, or refuse it as live does."""
        if self.quota_per_hour is None:
            return
        now = time.monotonic()
        with self.lock:
            self.spent = [t for t in self.spent if now - t < 3600]
            if len(self.spent) >= self.quota_per_hour:
                raise ApiError(
                    429, f"Tenant rate limit exceeded: {self.quota_per_hour} requests per hour"
                )
            self.spent.append(now)

    # -- snapshots -----------------------------------------------------------------------

    def capture(self, ts: int, report_day: int | None = None) -> None:
        """Snapshot the fleet at ``ts`` (a midnight) as the day that just ended."""
        if ts < self.keep_from:
            return
        day = report_day if report_day is not None else ts - DAY
        self.pending.append((day, snapshot_tables(self.world, ts, day, self.keep_from)))

    def _materialize(self) -> None:
        for day, tables in self.pending:
            rd = datetime.fromtimestamp(day, UTC).date()
            for name, table in tables.items():
                self.con.execute(f"delete from {name} where report_date = ?", [rd])
                self.con.register("_snap", table)
                self.con.execute(f"insert into {name} select * from _snap")
                self.con.unregister("_snap")
        self.pending.clear()

    # -- jobs ----------------------------------------------------------------------------

    def submit(self, query: str, row_limit: int, latest: bool) -> Job:
        """Run ``query`` now (the job reveals its outcome over the next polls)."""
        w = self.world
        job = Job(new_id(w.engine.rng), query, w.now, row_limit=row_limit, latest=latest)
        if latest:
            today = w.now - w.now % DAY
            self.pending.append((today, snapshot_tables(w, w.now, today, self.keep_from)))
        with self.lock:
            self._materialize()
            try:
                sql = spark_to_duckdb(query.strip().rstrip(";").strip())
                cur = self.con.cursor()
                statements = cur.extract_statements(sql)
                if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                    raise duckdb.Error("only one read-only SELECT statement is accepted")
                rel = cur.sql(sql)
                job.columns = [
                    {
                        "name": n,
                        "position": k,
                        "type_name": column_type(t)[0],
                        "type_text": column_type(t)[1],
                    }
                    for k, (n, t) in enumerate(zip(rel.columns, rel.types, strict=True))
                ]
                rows = rel.limit(row_limit + 1).fetchall()
                job.truncated = len(rows) > row_limit
                job.rows = [[cell_value(v) for v in r] for r in rows[:row_limit]]
                cur.close()
            except duckdb.Error as e:
                job.error = str(e).splitlines()[0] if str(e) else type(e).__name__
        self.jobs[job.id] = job
        return job

    def cancel(self, job_id: str) -> None:
        """Cancel a query (the ``query_canceled`` fault); unknown ids are left to the route."""
        job = self.jobs.get(job_id.lower())
        if job is not None:
            job.canceled = True

    def view(self, job: Job) -> dict[str, Any]:
        """The job as the next poll sees it (PENDING, RUNNING, then the outcome)."""
        job.polls += 1
        base = {**self.record(job), "error_message": None}  # the status route's (docs §15)
        if job.canceled:
            return {**base, "status": "CANCELED"}
        if self.job_seconds is not None:  # a job that runs this long in wall-clock time
            if time.monotonic() - job.submitted_at < self.job_seconds:
                status = "RUNNING" if job.polls > 1 else "PENDING"
                job.polls = min(job.polls, 2)  # its result is read from the next poll on
                return {**base, "status": status}
            job.polls = max(job.polls, 3)
        if job.polls == 1:
            return base
        if job.polls == 2:
            return {**base, "status": "RUNNING"}
        if job.error is not None:
            return {**base, "status": "FAILED", "error_message": job.error}
        if job.polls > CLOSED_AFTER_POLLS:
            return {**base, "status": "CLOSED"}
        return {
            **base,
            "status": "SUCCEEDED",
            "result": {
                "schema": {"column_count": len(job.columns), "columns": job.columns},
                "data_array": [[None if v is None else str(v) for v in r] for r in job.rows],
                "truncated": job.truncated,
            },
        }

    def record(self, job: Job) -> dict[str, Any]:
        """The job as the submission answers it: the documented fields (no ``error_message``,
        which only the status route documents), status PENDING, no result yet."""
        w = self.world
        return {
            "id": job.id,
            "tenant_id": w.fleet.tenant_id,
            "user_id": w.fleet.users[0],
            "query": job.query,
            "created_at": iso(job.created),
            "updated_at": iso(job.created),
            "is_download": False,
            "row_limit": job.row_limit,
            "latest_data": job.latest,
            "status": "PENDING",
            "result": None,
        }
