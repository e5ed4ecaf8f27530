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
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import duckdb
import orjson
import pyarrow as pa
from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import DAY, new_id
from esper_warehouse.simulator.http import ApiError, Req
from esper_warehouse.simulator.timeutil import iso

if TYPE_CHECKING:
    from esper_warehouse.simulator.state import World

DEFAULT_ROW_LIMIT = 10_000
MAX_ROW_LIMIT = 100_000

_DDL = """
create table devices (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, name varchar, os varchar, platform varchar, os_version varchar,
    state varchar, group_id varchar, security_patch_level date, agent_version varchar,
    blueprint_id varchar, blueprint_version integer, blueprint_upgrade_status varchar,
    is_gms boolean, hardware_info varchar, last_seen varchar, created_at timestamptz,
    updated_at timestamptz);
create table device_apps (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, package_name varchar, app_name varchar, version_name varchar,
    version_code varchar, updated_at timestamptz);
create table groups (report_date date, report_generation_timestamp timestamptz,
    group_id varchar, group_name varchar, path varchar, parent_id varchar, device_count integer);
create table device_stats (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, battery_level varchar, latitude varchar, longitude varchar,
    memory_stats varchar, battery_stats varchar, network_stats varchar, location_stats varchar);
create table users (report_date date, report_generation_timestamp timestamptz,
    user_id varchar, role_name varchar, created_at timestamptz);
"""

# `devices.state` as the live Data Tap table names it (a provisioning state, not the API's code).
_PROVISIONING_STATE = {0: "UNSPECIFIED", 1: "PROVISIONED", 60: "PROVISIONED", 200: "PROVISIONED",
                       20: "DISABLED", 70: "WIPE_IN_PROGRESS"}  # fmt: skip
_ROLES = ("Enterprise Admin", "Group Viewer", "Group Admin", "Viewer")


def _provisioning_state(code: int) -> str:
    if code in _PROVISIONING_STATE:
        return _PROVISIONING_STATE[code]
    if 30 <= code <= 50:
        return "PROVISIONING"
    return "ONBOARDING" if code <= 100 else "APPLYING_BLUEPRINT"


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


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


def _type(t: duckdb.typing.DuckDBPyType) -> tuple[str, str]:
    s = str(t).upper()
    simple = {
        "BOOLEAN": ("BOOLEAN", "boolean"),
        "TINYINT": ("BYTE", "tinyint"),
        "SMALLINT": ("SHORT", "smallint"),
        "INTEGER": ("INT", "int"),
        "BIGINT": ("LONG", "bigint"),
        "HUGEINT": ("LONG", "bigint"),
        "UBIGINT": ("LONG", "bigint"),
        "UINTEGER": ("LONG", "bigint"),
        "FLOAT": ("FLOAT", "float"),
        "DOUBLE": ("DOUBLE", "double"),
        "VARCHAR": ("STRING", "string"),
        "DATE": ("DATE", "date"),
        "TIMESTAMP": ("TIMESTAMP", "timestamp"),
        "TIMESTAMP WITH TIME ZONE": ("TIMESTAMP", "timestamp"),
    }
    if s in simple:
        return simple[s]
    if s.startswith("DECIMAL"):
        return "DECIMAL", s.lower()
    return "STRING", "string"


def _value(v: Any) -> Any:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (list, dict, tuple)):
        return str(v)
    return v


_SINGLE_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'")
_DOUBLE_QUOTED_NAME = re.compile(r'"[A-Za-z_][A-Za-z0-9_]*"')


def _spark_to_duckdb(sql: str) -> str:
    """The live dialect (Spark SQL) translated for DuckDB; a double-quoted identifier refused.

    Live Data Tap runs Spark SQL, where `"name"` is not an identifier (backticks are): the job
    ends FAILED with an error message, as this raises `duckdb.Error` into the job's error.
    """
    import sqlglot

    found = _DOUBLE_QUOTED_NAME.search(_SINGLE_QUOTED.sub("''", sql))
    if found:
        raise duckdb.Error(
            f"[PARSE_SYNTAX_ERROR] double-quoted identifier {found.group(0)} is not Spark SQL: "
            "quote identifiers with backticks"
        )
    try:
        return sqlglot.transpile(sql, read="spark", write="duckdb")[0]
    except sqlglot.errors.ParseError as error:
        raise duckdb.Error(f"[PARSE_SYNTAX_ERROR] {str(error).splitlines()[0]}") from None


def _device_stats(f: Any, live: list[int], ts: int) -> dict[str, pa.Array]:
    """`device_stats` columns: figures as text, blobs as JSON text (live-observations §19)."""
    ids, battery, lat, lon, memory, battery_blob, network, location = ([] for _ in range(8))
    for i in live:
        # a fixed place and memory size per device, drawn from its id; battery from the fleet
        h = int(f.ids[i][:8], 16)
        la, lo = round(-40 + (h % 8000) / 100, 5), round(-120 + (h // 8000 % 24000) / 100, 5)
        total = (2 + h % 7) * 1024**3
        ids.append(f.ids[i])
        battery.append(str(f.battery[i]) if f.battery[i] is not None else None)
        lat.append(str(la))
        lon.append(str(lo))
        memory.append(_json({"units": "BYTE", "total_ram": total,
                             "available_ram": total * (20 + h % 60) // 100}))  # fmt: skip
        battery_blob.append(_json({"level": f.battery[i], "charging": bool(h % 3 == 0)}))
        network.append(_json({"network_type": "WIFI" if h % 4 else "MOBILE",
                              "signal_strength": -40 - h % 50}))  # fmt: skip
        location.append(_json({"latitude": la, "longitude": lo}))
    text = pa.string()
    return {
        "device_id": pa.array(ids, text),
        "battery_level": pa.array(battery, text),
        "latitude": pa.array(lat, text),
        "longitude": pa.array(lon, text),
        "memory_stats": pa.array(memory, text),
        "battery_stats": pa.array(battery_blob, text),
        "network_stats": pa.array(network, text),
        "location_stats": pa.array(location, text),
    }


class DataTap:
    """Snapshot store, DuckDB database and query jobs of one world."""

    def __init__(self, world: World, keep_from: int) -> None:
        self.world = world
        self.keep_from = keep_from
        self.pending: list[tuple[int, dict[str, pa.Table]]] = []
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.con = duckdb.connect(config={"enable_external_access": False, "threads": 1})
        self.con.execute(_DDL)
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
        self.pending.append((day, self._tables(ts, day)))

    def _tables(self, ts: int, day: int) -> dict[str, pa.Table]:
        f = self.world.fleet
        rd = datetime.fromtimestamp(day, UTC).date()
        generated = datetime.fromtimestamp(ts, UTC)  # report_generation_timestamp
        live = f.live()
        n = len(live)
        tz = pa.timestamp("s", tz="UTC")

        def col(values: list[Any], typ: pa.DataType) -> pa.Array:
            return pa.array(values, type=typ)

        def stamp(count: int) -> dict[str, pa.Array]:
            return {
                "report_date": col([rd] * count, pa.date32()),
                "report_generation_timestamp": col([generated] * count, tz),
            }

        ls = [f.last_seen[i] if f.last_seen[i] >= 0 else None for i in live]
        patch = [
            date.fromisoformat(f.patch_levels[f.patch[i]]) if f.patch[i] >= 0 else None
            for i in live
        ]
        devices = pa.table(
            {
                **stamp(n),
                "device_id": col([f.ids[i] for i in live], pa.string()),
                "name": col([f.name[i] for i in live], pa.string()),
                "os": col([C.OS_NAMES[f.os[i]] for i in live], pa.string()),
                "platform": col([C.PLATFORMS[C.OS_PLATFORM[f.os[i]]] for i in live], pa.string()),
                "os_version": col([C.OS_VERSIONS[f.os[i]][f.osv[i]][0] for i in live], pa.string()),
                "state": col([_provisioning_state(f.state[i]) for i in live], pa.string()),
                "group_id": col(
                    [f.groups[f.group[i]].id if f.group[i] != C.NO_GROUP else None for i in live],
                    pa.string(),
                ),
                "security_patch_level": col(patch, pa.date32()),
                "agent_version": col(
                    [C.AGENTS[C.OS_PLATFORM[f.os[i]]][f.agent[i]][0] for i in live], pa.string()
                ),
                "blueprint_id": col([f.blueprints[f.bp_current[i]].id for i in live], pa.string()),
                "blueprint_version": col(
                    [f.bp_versions[f.bp_ver[i]][1] + 1 for i in live], pa.int32()
                ),
                "blueprint_upgrade_status": col(
                    [C.UPGRADE_STATUSES[f.bp_status[i]] for i in live], pa.string()
                ),
                "is_gms": col([f.is_gms[i] for i in live], pa.bool_()),
                "hardware_info": col(
                    [
                        _json({"serialNumber": f.serial[i], "manufacturer": C.OS_NAMES[f.os[i]]})
                        for i in live
                    ],
                    pa.string(),
                ),
                # text, as live: "2026-10-01 09:30:00" (cast it with try_cast)
                "last_seen": col(
                    [
                        datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d %H:%M:%S") if x else None
                        for x in ls
                    ],
                    pa.string(),
                ),
                "created_at": col([f.created[i] for i in live], tz),
                "updated_at": col([f.updated[i] for i in live], tz),
            }
        )
        app_rows: dict[str, list[Any]] = {k: [] for k in ("device_id", "package_name", "app_name")}
        app_rows.update({"version_name": [], "version_code": [], "updated_at": []})
        for i in live:
            cat = f.legacy_apps if C.OS_PLATFORM[f.os[i]] == C.ANDROID else f.tenant_apps
            for k, v, _c, u in f.apps[i]:
                app = cat[k]
                app_rows["device_id"].append(f.ids[i])
                app_rows["package_name"].append(app.package)
                app_rows["app_name"].append(app.name)
                app_rows["version_name"].append(app.versions[v].name)
                app_rows["version_code"].append(app.versions[v].code)
                app_rows["updated_at"].append(u)
        m = len(app_rows["device_id"])
        device_apps = pa.table(
            {
                **stamp(m),
                **{k: col(vals, pa.string()) for k, vals in app_rows.items() if k != "updated_at"},
                "updated_at": col(app_rows["updated_at"], tz),
            }
        )
        counts = self.world.group_counts()
        g_n = len(f.groups)
        groups = pa.table(
            {
                **stamp(g_n),
                "group_id": col([g.id for g in f.groups], pa.string()),
                "group_name": col([g.name for g in f.groups], pa.string()),
                "path": col([g.path for g in f.groups], pa.string()),
                "parent_id": col(
                    [f.groups[g.parent].id if g.parent >= 0 else None for g in f.groups],
                    pa.string(),
                ),
                "device_count": col(counts, pa.int32()),
            }
        )
        stats = pa.table({**stamp(n), **_device_stats(f, live, ts)})
        users = pa.table(
            {
                **stamp(len(f.users)),
                "user_id": col(list(f.users), pa.string()),
                "role_name": col(
                    [_ROLES[k % len(_ROLES)] for k in range(len(f.users))], pa.string()
                ),
                "created_at": col([self.keep_from] * len(f.users), tz),
            }
        )
        return {
            "devices": devices,
            "device_apps": device_apps,
            "groups": groups,
            "device_stats": stats,
            "users": users,
        }

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
            self.pending.append((today, self._tables(w.now, today)))
        with self.lock:
            self._materialize()
            try:
                sql = _spark_to_duckdb(query.strip().rstrip(";").strip())
                cur = self.con.cursor()
                statements = cur.extract_statements(sql)
                if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                    raise duckdb.Error("only one read-only SELECT statement is accepted")
                rel = cur.sql(sql)
                job.columns = [
                    {"name": n, "position": k, "type_name": _type(t)[0], "type_text": _type(t)[1]}
                    for k, (n, t) in enumerate(zip(rel.columns, rel.types, strict=True))
                ]
                rows = rel.limit(row_limit + 1).fetchall()
                job.truncated = len(rows) > row_limit
                job.rows = [[_value(v) for v in r] for r in rows[:row_limit]]
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
        base = self.record(job)
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
        """The job's documented fields, status PENDING, no result yet."""
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
            "error_message": None,
        }


def create(w: World, req: Req) -> tuple[int, Any]:
    """POST /data-tap/v0/queries."""
    import orjson

    w.datatap.spend()
    try:
        body = orjson.loads(req.body or b"{}")
    except orjson.JSONDecodeError:
        raise ApiError(400, "request body must be JSON") from None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("query"), str)
        or not body["query"].strip()
    ):
        raise ApiError(400, "query: a non-empty SQL string is required")
    row_limit = body.get("row_limit", DEFAULT_ROW_LIMIT)
    if row_limit is None:
        row_limit = DEFAULT_ROW_LIMIT
    if not isinstance(row_limit, int) or isinstance(row_limit, bool) or row_limit < 1:
        raise ApiError(400, "row_limit: a positive integer is required")
    latest = bool(body.get("latest_data", False))
    job = w.datatap.submit(body["query"], min(row_limit, MAX_ROW_LIMIT), latest)
    return 201, {"content": w.datatap.record(job)}


def get(w: World, req: Req) -> tuple[int, Any]:
    """GET /data-tap/v0/queries/{id}."""
    w.datatap.spend()
    job = w.datatap.jobs.get(req.params["id"].lower())
    if job is None:
        raise ApiError(404, f"Query {req.params['id']} not found")
    return 200, {"content": w.datatap.view(job)}
