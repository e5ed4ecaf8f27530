"""Devices and what hangs off them: history, census, installed apps, last-seen heartbeats.

The declarations of the device tables, and the heartbeats' resource. The other device tables are
loaded by the devices scan (`scan/devices.py`): the list, its history and census, each device's
installed apps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import dlt
import pyarrow as pa

from ..common import Options, unless_skipped
from ..http import EsperClient
from ..http.pages import read_all
from ..http.paginators import CursorPaginator
from ..run.ledger import RunLedger
from ..run.state import HEARTBEATS_SEEN, advance_watermark, read_from
from ..table import BOOL, INT, JSON, MAX_PAGE_SIZE, PAGE_SIZE, TS, Col, Doc, Table, cols, flat
from ..times import iso
from ..vocabulary import device_state_code, device_state_text

log = logging.getLogger("esper_warehouse.source")

_DEVICE = (
    *cols("id name alias os platform serial os_version global_device_id tenant_id group_id"),
    # `state` is a code; a record that serves text ("inactive") keeps it in `state_text` too.
    Col("state", INT, convert=device_state_code),
    Col("state_text", path=("state",), convert=device_state_text),
    *cols("dpc_version eea_version managed_by provisioned_with template_name device_source"),
    *cols("created_by updated_by udid mqtt_topic fcm_id dep_profile dep_profile_status"),
    *cols("is_gms is_seamless is_esper_managed is_supervised is_locked_down is_ddm_enabled", BOOL),
    *cols("created_at updated_at provisioned_on last_seen", TS),
    *cols("dep_profile_push_time dep_profile_assign_time", TS),
    *cols("tags hardware_info software_info network_info memory_info network_stats", JSON),
    *cols("location_stats memory_stats cpu_stats blueprint_info battery_stats policy", JSON),
    *cols("enrolment_info tokens windows_config app_mode_meta foundation_info", JSON),
    *flat("hardware_info__brand hardware_info__model hardware_info__manufacturer"),
    *flat("software_info__security_patch_level software_info__os_build_number"),
    *flat("software_info__esper_agent_info__version_name"),
    *flat("blueprint_info__assigned_blueprint_id blueprint_info__current_blueprint_id"),
    *flat("blueprint_info__current_blueprint_version_id blueprint_info__blueprint_upgrade_status"),
    *flat("battery_stats__battery_level", INT),
    # Esper's own verdicts (live routes 12 and 15): drift codes are ints whose meaning Esper does
    # not publish (sql/vocabulary/drift_states.csv); `security_state` was null in every recording,
    # so its type is unknown: kept as JSON.
    *cols("drift_state drift_severity", INT),
    *cols("security_state active_plugins", JSON),
)

# Apple apps (v2 device-apps, live §9): `bundle_id` and `apple_app_version` are their package and
# version (VPP and ESPER_IOS apps are in no tenant app list); staging reads them as such.
_DEVICE_APP = (
    *cols("id package_name app_name version_code version_name app_id app_version_id app_type"),
    *cols("bundle_id apple_app_version platform"),
    Col("device_families", JSON),
    *cols("state product_id device"),
    *cols("is_active whitelisted is_data_clearable is_uninstallable is_kiosk_app", BOOL),
    *cols("is_esper_controlled auto_update", BOOL),
    *cols("created_on updated_on created_at updated_at", TS),
)

V2_DEVICE_APPS_PATH = "/v2/devices/{id}/device-apps/"  # Apple and Windows devices' apps
DEVICE_DETAIL_PATH = "/v2/devices/{id}"  # one device: a device asked again (`_asked_again`)
# The legacy device list: the only list that carries Android patch levels and build numbers
# (`softwareInfo.securityPatchLevel`, `androidBuildNumber`; live routes 11 and 14). `/v2/devices/`
# list items have neither (live route 15). See docs/decisions.md, "Patch levels".
LEGACY_DEVICES_PATH = "/enterprise/{eid}/device/"

DEVICES = Table(
    "devices",
    "/v2/devices/",
    ("id",),
    "updated_at",
    paginator=CursorPaginator,
    page_size=MAX_PAGE_SIZE,
    columns=_DEVICE,
    doc=Doc(
        read=f"(cursor pages, newest `updated_at` first, {MAX_PAGE_SIZE} a page); Android patch "
        f"level and build number from the legacy `GET {LEGACY_DEVICES_PATH}` ({PAGE_SIZE} a "
        "page, read whole each run)",
        kept="stop paging at the watermark − lag; a full scan on the first run, with `--full`, "
        "or weekly",
        envelope="v2-list (offset mode; the source pages in cursor mode, below); items without "
        "`security_patch_level`/`os_build_number`, `foundation_info: null`; Android items carry "
        "`drift_state`/`drift_severity` ints (simulated: `simulator/drift.py`) and "
        "`security_state` (null on the recorded device; a string in Esper's documents, "
        '`"LOW_RISK"`: simulated as `SECURE`, `LOW_RISK`, `MEDIUM_RISK`, `HIGH_RISK` or null, '
        "`simulator/security.py`)",
        evidence="docs (esper-io/dev-docs EQL, console_docs device security)",
    ),
)
DEVICE_HISTORY = Table(
    "device_history",
    "/v2/devices/",
    ("id", "updated_at"),
    paginator=CursorPaginator,
    loaded_with="devices",
    page_size=MAX_PAGE_SIZE,
    columns=_DEVICE,
    doc=Doc(read="(the pages `devices` reads)", kept="every version of every device ever loaded"),
)
DEVICE_CENSUS = Table(
    "device_census",
    "/v2/devices/",
    (),
    paginator=CursorPaginator,
    disposition="replace",
    loaded_with="devices",
    page_size=MAX_PAGE_SIZE,
    columns=(Col("id"), Col("updated_at", TS), Col("census_at", TS)),
    keep_extra=False,
    doc=Doc(
        read="(a complete device scan)",
        kept="replaced by each complete scan: devices absent from it and not updated since are "
        "removed",
    ),
    family="census",  # read by full scans only: older than the nightly devices, by design
)
HEARTBEATS = Table(
    "heartbeats",
    "/v2/heartbeat/",
    ("device_id", "timestamp"),
    "timestamp",
    columns=(Col("device_id"), Col("timestamp", TS), Col("status", INT)),
    keep_extra=False,
    probe=False,  # needs a last_seen window: doctor probes it by hand
    doc=Doc(
        read="(`last_seen_gt`, `last_seen_lt`)",
        kept="window from the newest `timestamp` loaded − lag to 30 days past the API's `Date` "
        "(the data's own cursor, not the API's clock)",
        envelope="cc-list (`prev`)",
    ),
)
DEVICE_APPS = Table(
    "device_apps",
    "/enterprise/{eid}/device/{id}/app/",
    ("device_id", "id"),
    disposition="scd2",
    merge_key="device_id",
    columns=(Col("device_id"), Col("route"), *_DEVICE_APP),
    needs=("devices",),  # read per device of this run's walk; retired against its census
    doc=Doc(
        read=f"(Android); Apple/Windows `GET {V2_DEVICE_APPS_PATH}` (App Store and Esper iOS "
        "apps carry only `bundle_id` and `apple_app_version`, which staging uses as package and "
        "version)",
        kept="dlt `scd2` per device for devices that changed: `_dlt_valid_to` set = uninstalled "
        "or replaced, at the API's time; a device whose list was refused keeps its rows and is "
        "asked again by the next run",
        envelope="legacy-list (Android installed apps)",
    ),
)
TABLES = (DEVICES, DEVICE_HISTORY, DEVICE_CENSUS, HEARTBEATS, DEVICE_APPS)  # fmt: skip

HEARTBEAT_AHEAD = timedelta(days=30)  # the window's end past the API's `Date`


@dlt.resource(**HEARTBEATS.hints())
def heartbeats(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Last-seen observations from the newest one loaded (minus the lag) onwards.

    The window starts at the newest `timestamp` the last run read, not at its clock: a server
    whose `Date` runs ahead of its data would otherwise skip the observations in between. Its
    end (required by the route) lies `HEARTBEAT_AHEAD` past the API's `Date`, so a `Date` that
    runs behind the data cuts nothing off either.
    """
    yield from unless_skipped(ledger, HEARTBEATS.name, lambda: _heartbeats(client, ledger, opts))


def _heartbeats(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    now = ledger.plan.as_of
    assert now is not None
    start = read_from(HEARTBEATS_SEEN, opts.lag, ledger) or now - opts.heartbeat_start
    params = {"last_seen_gt": iso(start), "last_seen_lt": iso(max(now, start) + HEARTBEAT_AHEAD)}
    key = HEARTBEATS.key
    read = read_all(
        client,
        HEARTBEATS.path_for(client),
        params,
        limit=HEARTBEATS.limit(opts.page_size),
        key=key,
        parallel=True,
    )
    ledger.scans.add("heartbeats", read.count, read.items, key)
    if read.items:
        yield HEARTBEATS.page(read.items, ledger)
    seen = (HEARTBEATS.cursor_time(item) for item in read.items)
    newest = max((ts for ts in seen if ts is not None), default=None)
    ledger.data_clock.saw(newest)
    advance_watermark(HEARTBEATS_SEEN, newest)
