"""What the source loads, declared once: one line per table, plus the defaults of every setting.

Each `Endpoint` says where a table comes from, how many items a page may hold, its key, its cursor,
how dlt writes it and which table it comes with. The resources read these declarations (their dlt
hints come from `common.hints_of`, which adds the columns of `schemas.SCHEMAS`); nothing else in
the package repeats a path, a page size, a key or a write disposition. How each table is kept up to
date, in words, is in the docstring of its resource and in README's "Raw tables", whose tables and
keys are tested against this one (tests/pipeline/test_declarations.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# `/v2/devices/` allows 1000 items per page (the spec's maximum; 142,632 devices walked at 1000
# in the live smoke test). Every other list is read 250 at a time: the page size Esper's own
# support tool settled on after trying 1000 (live-shapes.json `client_practice.page_size`).
# `/v2/blueprints/` is read 20 at a time, as Esper's own support tool reads it (live-observations
# section 23): blueprints carry their whole settings tree.
MAX_PAGE_SIZE = 1000
PAGE_SIZE = 250
BLUEPRINT_PAGE_SIZE = 20

# How dlt writes a table:
# - merge: on its key (dlt's default merge; a first load appends:
#   `dispositions.append_on_first_load`).
# - insert-only: merged by inserting the keys not yet stored, never rewriting a row (immutable
#   records); where a destination lacks it, dlt's default merge (`dispositions.merge_where_needed`).
# - replace: the whole table each run.
# - scd2: dlt's history of versions, validity at the run's API time (`__init__.py` sets it); rows
#   of a merge key absent from a new read are retired; `key` is unique among the current rows.
Disposition = Literal["merge", "insert-only", "replace", "scd2"]


@dataclass(frozen=True)
class Endpoint:
    """One raw table: its route, key, cursor, write disposition and page size.

    Attributes:
        table: the raw table (and resource) name.
        path: the route; `{eid}` = enterprise id, `{id}` = parent id.
        key: the columns that identify a row (the dlt primary key, except for scd2 tables,
            whose rows are versions); empty: none (a replaced snapshot).
        cursor: the record field whose newest value read is the table's watermark; None: the
            table is read whole, or per parent, or rides on another table's scan.
        disposition: how dlt writes the table (see `Disposition`).
        merge_key: scd2 only: the column whose rows one read replaces as a whole.
        loaded_with: the table whose selection (`run --resources <it>`) loads this one too.
        page_size: the most items one page may hold.
    """

    table: str
    path: str
    key: tuple[str, ...]
    cursor: str | None = None
    disposition: Disposition = "merge"
    merge_key: str | None = None
    loaded_with: str | None = None
    page_size: int = PAGE_SIZE


ENDPOINTS: dict[str, Endpoint] = {
    e.table: e
    for e in (
        Endpoint("devices", "/v2/devices/", ("id",), "updated_at", page_size=MAX_PAGE_SIZE),
        Endpoint("device_history", "/v2/devices/", ("id", "updated_at"), loaded_with="devices",
                 page_size=MAX_PAGE_SIZE),
        Endpoint("device_census", "/v2/devices/", (), disposition="replace",
                 loaded_with="devices", page_size=MAX_PAGE_SIZE),
        Endpoint("heartbeats", "/v2/heartbeat/", ("device_id", "timestamp"), "timestamp"),
        Endpoint("groups", "/enterprise/{eid}/devicegroup/", ("id",), disposition="replace"),
        Endpoint("blueprints", "/v2/blueprints/", ("id",), page_size=BLUEPRINT_PAGE_SIZE),
        Endpoint("blueprint_versions", "/v2/blueprints/{id}/versions/", ("version_id",),
                 loaded_with="blueprints"),
        Endpoint("tenant_apps", "/v2/tenant-apps", ("id",)),
        Endpoint("tenant_app_versions", "/v2/tenant-apps/{id}/versions", ("id",),
                 loaded_with="tenant_apps"),
        Endpoint("applications", "/v1/enterprise/{eid}/application/", ("id",)),
        Endpoint("application_versions", "/v1/enterprise/{eid}/application/{id}/version/",
                 ("id",)),
        Endpoint("device_apps", "/enterprise/{eid}/device/{id}/app/", ("device_id", "id"),
                 disposition="scd2", merge_key="device_id"),
        Endpoint("command_requests", "/commands/v0/commands/", ("id",), "created_at"),
        Endpoint("command_statuses", "/commands/v0/status/", ("id",), "updated_at"),
        Endpoint("operations", "/v0/operations/", ("id",), "updated_at"),
        Endpoint("operation_devices", "/v0/operations/{id}/devices/", ("id",), "updated_at"),
        Endpoint("device_events", "/enterprise/{eid}/device/{id}/download/eventfeed/", ("id",),
                 "created_on", disposition="insert-only"),
        Endpoint("status_metrics", "/v2/enterprise/{eid}/report/status-metrics",
                 ("snapshot_date",)),
    )
}  # fmt: skip

V2_DEVICE_APPS_PATH = "/v2/devices/{id}/device-apps/"
# The legacy device list: the only list that carries Android patch levels and build numbers
# (`softwareInfo.securityPatchLevel`, `androidBuildNumber`; live routes 11 and 14). `/v2/devices/`
# list items have neither (live route 15). See docs/decisions.md, "Patch levels".
LEGACY_DEVICES_PATH = "/enterprise/{eid}/device/"
DATA_TAP_PATH = "/data-tap/v0/queries"

# Which command and operation states are terminal: sql/vocabulary/work_states.csv, read through
# `vocabulary.is_terminal` (the SQL models read the same file).

# Defaults of the source's settings (`SOURCES__ESPER__<NAME>` or `[sources.esper]` in config.toml).
LAG_HOURS = 2.0
FULL_SCAN_INTERVAL_DAYS = 7.0
STATUS_BATCH_SIZE = 100
INITIAL_CONCURRENCY = 20
MAX_CONCURRENCY = 64
MAX_RETRIES = 8
REQUEST_TIMEOUT_S = 60.0  # a whole attempt: connect, headers and body
# Seconds one request may wait between its attempts in total (Retry-After, backoff); a longer
# Retry-After fails the request at once, quoting it (docs/decisions.md, "Bounded requests").
MAX_RETRY_WAIT_S = 300.0
HEARTBEAT_START_DAYS = 365.0
# A full scan of more devices is committed in parts of this many devices' apps and feeds (about
# 2,000 requests, 80 s at 25 requests/s): a killed first load loses at most one part (walk.py).
COMMIT_EVERY_DEVICES = 1000
DATA_TAP_DEADLINE_S = 900.0
DATA_TAP_STUCK_S = 300.0
DATA_TAP_ROW_LIMIT = 100_000
# Data Tap's quota is the tenant's, shared with its console and other tools: Esper's own reporting
# client budgets 25 requests per rolling hour (submissions and polls alike) and polls after 10,
# 20, then 30 s (live-observations section 18); the last wait repeats.
DATA_TAP_REQUESTS_PER_HOUR = 25
DATA_TAP_POLL_S = (10.0, 20.0, 30.0)


# ------------------------------------------------------------------ accepted values, checked once
# Every setting of the `esper` source with its default and the values it accepts, checked by
# `check_settings` before the first request (the runner calls it; a bad value is exit 2 naming the
# setting). README's configuration table is tested against this declaration.
ENV_PREFIX = "SOURCES__ESPER__"


@dataclass(frozen=True)
class Setting:
    """A setting's type, default and accepted range (inclusive; None = unbounded)."""

    kind: type
    default: object
    low: float | None = None
    high: float | None = None

    def accepted(self) -> str:
        if self.kind is bool:
            return "true or false"
        if self.kind is tuple:
            return f"comma-separated seconds, each from {self.low:g} to {self.high:g}"
        if self.kind is dict:
            return (
                "a JSON object of name -> SQL text, or name -> {sql, cursor, key, lag_days} "
                "for an incremental query"
            )
        what = "a whole number" if self.kind is int else "a number"
        if self.high is None:
            return f"{what} >= {self.low:g}"
        return f"{what} from {self.low:g} to {self.high:g}"


SETTINGS: dict[str, Setting] = {
    "full_scan": Setting(bool, False),
    "full_scan_interval_days": Setting(float, FULL_SCAN_INTERVAL_DAYS, 0, 3650),
    # Negative would put the watermark in the future: the next runs skip what changed meanwhile.
    "lag_hours": Setting(float, LAG_HOURS, 0, 720),
    "page_size": Setting(int, MAX_PAGE_SIZE, 1, MAX_PAGE_SIZE),
    "status_batch_size": Setting(int, STATUS_BATCH_SIZE, 1, 200),  # ids in one URL
    "heartbeat_start_days": Setting(float, HEARTBEAT_START_DAYS, 0, 3650),
    "initial_concurrency": Setting(int, INITIAL_CONCURRENCY, 1, 256),
    "max_concurrency": Setting(int, MAX_CONCURRENCY, 1, 256),
    "max_retries": Setting(int, MAX_RETRIES, 0, 20),
    "request_timeout": Setting(float, REQUEST_TIMEOUT_S, 0.1, 3600),
    "max_retry_wait_s": Setting(float, MAX_RETRY_WAIT_S, 0, 86400),
    "commit_every_devices": Setting(int, COMMIT_EVERY_DEVICES, 1, 10_000_000),
    "data_tap_queries": Setting(dict, None),
    "data_tap_deadline_s": Setting(float, DATA_TAP_DEADLINE_S, 1, 86400),
    "data_tap_stuck_s": Setting(float, DATA_TAP_STUCK_S, 1, 86400),
    "data_tap_row_limit": Setting(int, DATA_TAP_ROW_LIMIT, 1, 10_000_000),
    "data_tap_requests_per_hour": Setting(int, DATA_TAP_REQUESTS_PER_HOUR, 2, 100_000),
    "data_tap_poll_s": Setting(tuple, DATA_TAP_POLL_S, 0, 3600),
}


class SettingError(ValueError):
    """A setting's value is outside what it accepts (the message names it and the range)."""


def _is_query(query: object) -> bool:
    """A Data Tap query: SQL text, or `{sql, cursor, key, lag_days}` (only `sql` required)."""
    if isinstance(query, str):
        return bool(query.strip())
    if not isinstance(query, dict) or not set(query) <= {"sql", "cursor", "key", "lag_days"}:
        return False
    key = query.get("key", [])
    lag = query.get("lag_days", 0)
    return (
        isinstance(query.get("sql"), str)
        and bool(query["sql"].strip())
        and isinstance(query.get("cursor", ""), str)
        and (
            isinstance(key, str) or (isinstance(key, list) and all(isinstance(k, str) for k in key))
        )
        and isinstance(lag, int | float)
        and not isinstance(lag, bool)
        and lag >= 0
        and ("{cursor}" in query["sql"]) == bool(query.get("cursor"))
    )


def _coerce(name: str, spec: Setting, value: object) -> object:
    """`value` (text from the environment, or a TOML value) as the setting's type."""
    import json
    import math

    bad = SettingError(
        f"{ENV_PREFIX}{name.upper()} (sources.esper.{name}) = {value!r}: expected {spec.accepted()}"
    )
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise bad
    if spec.kind is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and _is_query(v) for k, v in value.items()
        ):
            raise bad
        return dict(value)
    if spec.kind is tuple:
        parts = value.split(",") if isinstance(value, str) else value
        try:
            waits = tuple(float(part) for part in parts)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise bad from None
        if not waits or any(
            math.isnan(w) or not spec.low <= w <= spec.high  # type: ignore[operator]
            for w in waits
        ):
            raise bad
        return waits
    if isinstance(value, bool):
        raise bad
    try:
        number = spec.kind(str(value).strip()) if isinstance(value, str) else value
        if spec.kind is int and not float(number).is_integer():
            raise ValueError
        number = spec.kind(number)
    except (TypeError, ValueError):
        raise bad from None
    if math.isnan(number) or number < spec.low or (spec.high is not None and number > spec.high):
        raise bad
    return number


def check_settings(values: dict[str, object]) -> dict[str, object]:
    """The given settings (names of `SETTINGS`; others pass through) typed and range-checked.

    Raises:
        SettingError: the first value outside what its setting accepts, naming the setting,
            its environment variable and the accepted range.
    """
    checked = dict(values)
    for name, value in values.items():
        if name in SETTINGS and value is not None:
            checked[name] = _coerce(name, SETTINGS[name], value)
    # a setting looked up but not configured anywhere is present with the value None
    low = checked.get("initial_concurrency") or INITIAL_CONCURRENCY
    high = checked.get("max_concurrency") or MAX_CONCURRENCY
    if low > high:  # type: ignore[operator]
        raise SettingError(
            f"{ENV_PREFIX}INITIAL_CONCURRENCY ({low}) must not exceed "
            f"{ENV_PREFIX}MAX_CONCURRENCY ({high})"
        )
    return checked
