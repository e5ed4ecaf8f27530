"""Devices and what hangs off them: history, census, installed apps, last-seen heartbeats."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import dlt
import pyarrow as pa

from ..common import (
    REFUSED,
    ROWS_PER_BATCH,
    Options,
    apps_route,
    refused_part,
    unless_skipped,
)
from ..http import EsperClient, EsperError, EsperUnavailableError
from ..http.pages import fan_out, first_seen, iter_cursor_pages, parse_page, read_all
from ..http.paginators import CursorPaginator
from ..run.ledger import RunLedger
from ..run.state import (
    DEVICES_FULL_SCAN_AT,
    DEVICES_INCREMENTAL_AT,
    FIRST_LOAD_STARTED,
    HEARTBEATS_SEEN,
    DescScan,
    advance_cursor,
    bind_retries,
    cursor_state,
    read_from,
)
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

# ---------------------------------------------------------------------------------- devices


def device_count(client: EsperClient) -> int | None:
    """The API's device count: offset mode with limit=1 (cursor pages carry no count)."""
    body = client.get(DEVICES.path, {"limit": 1, "offset": 0})
    return parse_page(body, where=DEVICES.path).count


@dlt.resource(**DEVICES.hints())
def devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table | None]:
    """Cursor pages, newest `updated_at` first; stop at watermark - lag, or read all (full scan).

    A full scan reads the run's `DeviceWalk` (`RunPlan.walk`): the whole list, or its next part
    when the scan is committed in parts (`walk.py`). The part that ends the walk checks it
    against the API's count; if devices are missing (a device that changes while the scan runs
    moves ahead of the cursor), the list is read a second time. Only then does the cursor move.
    """
    bind_retries(ledger)  # every part: the parts refused before are asked again
    since = read_from("devices", opts.lag, ledger)
    if since is None:
        yield from _full_scan(client, ledger, opts)
        return
    software = _software(client, ledger, opts)
    scan = DescScan(DEVICES.cursor_field, since)  # an incremental read: it stops early, no count
    pages = iter_cursor_pages(client, DEVICES.path_for(client), limit=DEVICES.limit(opts.page_size))
    seen: set[tuple[Any, ...]] = set()
    for _page, fresh in scan.pages(pages):
        items = first_seen(DEVICES.require(fresh), seen, DEVICES.key)
        for item in items:
            ledger.devices.changed(item["id"], apps_route(item))
            with_software(item, software)
        if items:
            yield DEVICES.page(items, ledger.unreadable)
    listed = {key[0] for key in seen}
    asked_again = [d for d in ledger.refusals.to_retry(DEVICE_APPS.name) if d not in listed]
    yield from _asked_again(client, ledger, asked_again, software)
    advance_cursor("devices", scan.newest)
    cursor_state()[DEVICES_INCREMENTAL_AT] = iso(ledger.plan.as_of or datetime.now().astimezone())


def _full_scan(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table | None]:
    """This run's part of the complete device list; the part that ends it checks the count."""
    plan = ledger.plan
    walk, scope = plan.walk, plan.fan_out_scope  # sources/esper/run/scope.py
    assert walk is not None  # a full scan's, planned as the run opened (`plan_full_scan`)
    software = _software(client, ledger, opts)  # read once per run, by its first part

    # devices whose apps or feed an earlier run was refused: asked again in this scan
    refused = {d for t in (DEVICE_APPS.name, "device_events") for d in ledger.refusals.to_retry(t)}

    def needs(item: dict) -> bool:
        """Whether the scan reads this device's apps and feed (noted for the fan-outs)."""
        if scope is not None and not scope.needs(item) and str(item.get("id")) not in refused:
            return False
        ledger.devices.changed(item["id"], apps_route(item))
        return True

    def pages(parts: Iterator[list[dict] | None]) -> Iterator[pa.Table | None]:
        for items in parts:
            if items is None:  # the walk waits for its fan-outs: dlt resolves their futures
                yield None
                continue
            for item in items:
                with_software(item, software)
            yield DEVICES.page(items, ledger.unreadable)

    yield from pages(walk.take(needs))
    if not plan.completed_full_scan:  # kept from the first part until the first load ends
        cursor_state().setdefault(FIRST_LOAD_STARTED, iso(plan.as_of or datetime.now(UTC)))
    if not walk.exhausted or not plan.building_last:
        # a part: the next one goes on from here. A part whose walk reached the list's end is
        # not the last part either (that one reads the catalogues): the count, the cursor and
        # `devices_full_scan_at` are committed with the last part, beside the census, so that
        # a kill during the last part leaves a first load unfinished, not an incremental one.
        return
    count = device_count(client)
    if count is not None and len(walk.seen) < count:
        log.info(
            "devices: %d read for a count of %d, reading the list again", len(walk.seen), count
        )
        yield from pages(walk.again(needs))
    ledger.scans.expect("devices", count if count is not None else len(walk.seen))
    ledger.scans.add("devices", 0, ({"id": i} for i in walk.seen), ("id",))
    advance_cursor("devices", walk.newest)
    cursor_state()[DEVICES_FULL_SCAN_AT] = iso(plan.as_of or datetime.now().astimezone())


def _software(client: EsperClient, ledger: RunLedger, opts: Options) -> dict[str, dict[str, Any]]:
    """`android_software`, read once per run: every part of a full scan uses the first's."""
    return ledger.shared.read_once(
        "legacy device list", lambda: android_software(client, ledger, opts)
    )


def android_software(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> dict[str, dict[str, Any]]:
    """Patch level and build number of every device, from the legacy device list.

    `/v2/devices/` list items carry neither (live route 15); the legacy list does, in camelCase
    (`softwareInfo.securityPatchLevel`, `androidBuildNumber`; live route 14). Reading it whole costs
    one request per 250 devices (400 at 100,000), against one `/v2/devices/{id}` detail per
    changed device (2,000 a night at 2 % change; 100,000 on a first load): docs/decisions.md.
    """
    limit = min(opts.page_size or PAGE_SIZE, PAGE_SIZE)
    path = LEGACY_DEVICES_PATH.format(eid=client.enterprise_id)
    try:
        read = read_all(client, path, limit=limit, parallel=True, keep=software_of)
        return software_by_id(read.items)
    except EsperUnavailableError as error:  # the devices still load, without these two fields
        ledger.refusals.leave_out(DEVICES.name, legacy_list_refused(error))
        return {}


def legacy_list_refused(error: EsperUnavailableError) -> str:
    """What the devices table lacks when the legacy device list is refused (for `skipped`)."""
    return (
        "Android security patch levels and build numbers: "
        f"{error.route} answered {error.status} ({error.reason})"
    )


def software_of(item: dict) -> dict[str, Any] | None:
    """`{id, software: {security_patch_level, os_build_number}}` of a legacy device list item;
    None when it carries neither (all the list is read for: not the item whole)."""
    info = item.get("softwareInfo") or {}
    if not isinstance(info, dict) or not item.get("id"):
        return None
    patch, build = info.get("securityPatchLevel"), info.get("androidBuildNumber")
    if not (patch or build):
        return None
    return {
        "id": str(item["id"]),
        "software": {"security_patch_level": patch, "os_build_number": build},
    }


def software_by_id(kept: Iterable[dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Device id -> `{security_patch_level, os_build_number}` from what `software_of` kept."""
    return {one["id"]: one["software"] for one in kept if one is not None}


def with_software(item: dict, software: dict[str, dict[str, Any]]) -> None:
    """Fill a device's missing `software_info` patch level and build number (in place).

    A value the v2 record carries itself wins (the detail route and some tenants may serve it).
    """
    extra = software.get(item.get("id"))  # type: ignore[arg-type]
    if not extra:
        return
    info = item.get("software_info")
    info = dict(info) if isinstance(info, dict) else {}
    for name, value in extra.items():
        if info.get(name) is None and value is not None:
            info[name] = value
    item["software_info"] = info


def _asked_again(
    client: EsperClient, ledger: RunLedger, device_ids: list[str], software: dict[str, Any]
) -> Iterator[pa.Table]:
    """Devices whose apps an earlier run was refused, and that this run did not list: their
    records are read again one by one, so that `device_apps` asks for their apps again."""
    if not device_ids:
        return

    def fetch(device_id: str) -> dict | None:
        try:
            body = client.get(DEVICE_DETAIL_PATH.format(id=device_id))
        except EsperError as error:
            if not refused_part(ledger, client, DEVICE_APPS.name, DEVICES, device_id, error):
                ledger.devices.no_apps(device_id)  # gone twice: its apps are retired
            return None  # refused again (counted, asked next run), or gone
        content = body.get("content") if isinstance(body, dict) else None
        return content if isinstance(content, dict) else body if isinstance(body, dict) else None

    items = [item for _, item in fan_out(client, device_ids, fetch) if item and item.get("id")]
    for item in items:
        ledger.devices.changed(item["id"], apps_route(item))
        with_software(item, software)
    if items:
        yield DEVICES.page(items, ledger.unreadable)


@dlt.transformer(**DEVICE_HISTORY.hints())
def device_history(page: pa.Table) -> Iterator[pa.Table]:
    """Every device version the devices scan sees (one row per id and `updated_at`)."""
    yield page


@dlt.resource(**DEVICE_CENSUS.hints())
def device_census(ledger: RunLedger) -> Iterator[pa.Table]:
    """The devices present in this complete scan (full scans; after `devices` has ended the walk).

    Read from the run's walk, not from the device pages: when the scan is committed in parts
    (`walk.py`), the census is written whole, once, by the last part.
    """
    census_at, walk = ledger.plan.as_of, ledger.plan.walk
    assert walk is not None  # a full scan's: the census is read on full scans only
    rows = [{"id": i, "updated_at": u, "census_at": census_at} for i, u in walk.seen.items()]
    for start in range(0, len(rows), ROWS_PER_BATCH):
        yield DEVICE_CENSUS.page(rows[start : start + ROWS_PER_BATCH], ledger.unreadable)


@dlt.transformer(
    **DEVICE_APPS.hints(),  # scd2; its validity boundary is set per run (`__init__.py`)
    # In a dlt worker thread: a page's fan-out runs while the device scan and the other
    # resources go on (the client's limiter bounds the requests of all fan-outs together).
    parallelized=True,
)
def device_apps(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Each changed device's complete app list (Android: legacy route; Apple/Windows: v2).

    scd2 with merge key `device_id`: an app missing from its device's new list is retired
    (`_dlt_valid_to` = this run's API time); devices not in this run are left as they were.
    """
    ids = page.column("id").to_pylist()
    targets = [(d, route) for d in ids if (route := ledger.devices.apps_route(d))]
    limit, key = DEVICE_APPS.limit(opts.page_size), DEVICE_APPS.key

    def fetch(target: tuple[str, str]) -> Any:
        device_id, route = target
        path = (
            DEVICE_APPS.path_for(client, device_id)
            if route == "legacy"
            else (V2_DEVICE_APPS_PATH.format(id=device_id))
        )
        try:
            read = read_all(client, path, limit=limit)
        except EsperError as error:
            if refused_part(
                ledger, client, DEVICE_APPS.name, DEVICES, device_id, error, retry=route
            ):
                return REFUSED  # counted; its stored apps are neither retired nor replaced
            return None  # the device is gone (no longer listed): its apps are retired
        ledger.refusals.part_done(DEVICE_APPS.name, device_id)
        return read

    rows: list[dict] = []
    for (device_id, route), read in fan_out(client, targets, fetch, bulk=True):
        if read is REFUSED:
            continue
        if read is None or not read.items:  # device gone, or its list is empty
            ledger.devices.no_apps(device_id)  # scd2 cannot retire without a row
            continue
        items = [{**i, "device_id": device_id, "route": route} for i in read.items]
        ledger.scans.add("device_apps", read.count, items, key)
        rows.extend(items)
    ledger.plan.page_read(DEVICE_APPS.name)  # a part limited by time hands out more (`walk.py`)
    if rows:
        yield DEVICE_APPS.page(rows, ledger.unreadable, row_hash=True)


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
        yield HEARTBEATS.page(read.items, ledger.unreadable)
    seen = (HEARTBEATS.cursor_time(item) for item in read.items)
    advance_cursor(HEARTBEATS_SEEN, max((ts for ts in seen if ts is not None), default=None))
