"""What the source loads, declared once: one line per table, plus the defaults of every setting.

Each `Endpoint` says where a table comes from, how many items a page may hold, its key, its cursor
and how it is kept up to date. The resources in `resources.py` read these declarations; nothing
else in the package repeats a path, a page size or a key.
"""

from __future__ import annotations

from dataclasses import dataclass

# `/v2/devices/` allows 1000 items per page (the spec's maximum; 142,632 devices walked at 1000
# in the live smoke test). Every other list is read 250 at a time: the page size Esper's own
# support tool settled on after trying 1000 (live-shapes.json `client_practice.page_size`).
MAX_PAGE_SIZE = 1000
PAGE_SIZE = 250


@dataclass(frozen=True)
class Endpoint:
    """One raw table: its route, page size, key, cursor and update strategy."""

    table: str
    path: str  # `{eid}` = enterprise id, `{id}` = parent id
    key: tuple[str, ...]
    cursor: str | None
    strategy: str
    page_size: int = PAGE_SIZE


ENDPOINTS: dict[str, Endpoint] = {
    e.table: e
    for e in (
        Endpoint("devices", "/v2/devices/", ("id",), "updated_at",
                 "cursor pages, updated_at DESC: stop at watermark - lag; full scan on the first "
                 "run, with --full, or when the full-scan interval has passed; Android patch "
                 "level and build number joined from the legacy device list", MAX_PAGE_SIZE),
        Endpoint("device_history", "/v2/devices/", ("id", "updated_at"), "updated_at",
                 "every device version the devices scan sees, merged on (id, updated_at)",
                 MAX_PAGE_SIZE),
        Endpoint("device_census", "/v2/devices/", ("id",), None,
                 "replaced by each complete scan: the devices present in it", MAX_PAGE_SIZE),
        Endpoint("heartbeats", "/v2/heartbeat/", ("device_id", "timestamp"), "timestamp",
                 "window last_seen_gt = newest timestamp loaded - lag, last_seen_lt = the "
                 "API's now + 30 days"),
        Endpoint("groups", "/enterprise/{eid}/devicegroup/", ("id",), None, "replace each run"),
        Endpoint("blueprints", "/v2/blueprints/", ("id",), None, "merge each run"),
        Endpoint("blueprint_versions", "/v2/blueprints/{id}/versions/", ("version_id",), None,
                 "merge each run, every blueprint"),
        Endpoint("tenant_apps", "/v2/tenant-apps", ("id",), None, "merge each run"),
        Endpoint("tenant_app_versions", "/v2/tenant-apps/{id}/versions", ("id",), None,
                 "merge each run, every tenant app"),
        Endpoint("applications", "/v1/enterprise/{eid}/application/", ("id",), None,
                 "merge each run, the whole v1 catalogue (the legacy list misses apps)"),
        Endpoint("application_versions", "/v1/enterprise/{eid}/application/{id}/version/",
                 ("id",), None, "merge, whole lists of the applications whose latest_version "
                 "changed since the last run (every application on a full scan)"),
        Endpoint("device_apps", "/enterprise/{eid}/device/{id}/app/", ("device_id", "id"), None,
                 "scd2 per device (merge key device_id) for devices that changed in this run; "
                 "Apple/Windows from /v2/devices/{id}/device-apps/"),
        Endpoint("command_requests", "/commands/v0/commands/", ("id",), "created_at",
                 "stop at watermark - lag only while the pages seen run created_at DESC"),
        Endpoint("command_statuses", "/commands/v0/status/", ("id",), "updated_at",
                 "request=<ids> batches: requests new in this run or still open"),
        Endpoint("operations", "/v0/operations/", ("id",), "updated_at",
                 "ordering=-updated_at: stop at watermark - lag"),
        Endpoint("operation_devices", "/v0/operations/{id}/devices/", ("id",), "updated_at",
                 "operations new in this run or not yet terminal"),
        Endpoint("device_events", "/enterprise/{eid}/device/{id}/download/eventfeed/", ("id",),
                 "created_on", "devices with activity in this run; newest first, stop at the "
                 "device's watermark in the warehouse (feed count, event ids; watermarks.py)"),
        Endpoint("status_metrics", "/v2/enterprise/{eid}/report/status-metrics",
                 ("snapshot_date",), None, "one request per run: the tenant's counters, one row "
                 "per day of the API's clock, merged on the day (a re-run replaces it)"),
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
        if self.kind is dict:
            return "a JSON object of name -> SQL text"
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
}


class SettingError(ValueError):
    """A setting's value is outside what it accepts (the message names it and the range)."""


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
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()
        ):
            raise bad
        return dict(value)
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
