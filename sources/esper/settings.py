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
                 "window last_seen_gt = watermark - lag, last_seen_lt = the API's now"),
        Endpoint("groups", "/enterprise/{eid}/devicegroup/", ("id",), None, "replace each run"),
        Endpoint("blueprints", "/v2/blueprints/", ("id",), None, "merge each run"),
        Endpoint("blueprint_versions", "/v2/blueprints/{id}/versions/", ("version_id",), None,
                 "merge each run, every blueprint"),
        Endpoint("tenant_apps", "/v2/tenant-apps", ("id",), None, "merge each run"),
        Endpoint("tenant_app_versions", "/v2/tenant-apps/{id}/versions", ("id",), None,
                 "merge each run, every tenant app"),
        Endpoint("applications", "/enterprise/{eid}/application/", ("id",), None,
                 "merge each run, the whole v1 catalogue (the legacy list misses apps)"),
        Endpoint("application_versions", "/enterprise/{eid}/application/{id}/version/",
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
                 "previous run's API time - lag"),
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
DATA_TAP_DEADLINE_S = 900.0
DATA_TAP_STUCK_S = 300.0
DATA_TAP_ROW_LIMIT = 100_000
