"""The devices scan's resources: the device list, its history and census, each device's apps.

On an incremental run `devices` pages the list newest first and stops at the watermark less the
lag. On a full scan it hands out the run's `DeviceWalk` (`walk.py`), part by part; the part that
ends the walk checks it against the API's count, writes the census and moves the watermark.
The tables' declarations are in `tables/devices.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import dlt
import pyarrow as pa

from ..common import REFUSED, ROWS_PER_BATCH, Options, apps_route, refused_part
from ..http import EsperClient, EsperError, EsperUnavailableError
from ..http.pages import fan_out, first_seen, iter_pages, parse_page, read_all
from ..run.ledger import RunLedger
from ..run.state import (
    DEVICES_FULL_SCAN_AT,
    DEVICES_INCREMENTAL_AT,
    FIRST_LOAD_STARTED,
    EarlyStop,
    advance_watermark,
    bind_retries,
    is_loaded,
    kept_state,
    loaded_versions,
    read_from,
)
from ..table import PAGE_SIZE
from ..tables.devices import (
    DEVICE_APPS,
    DEVICE_CENSUS,
    DEVICE_DETAIL_PATH,
    DEVICE_HISTORY,
    DEVICES,
    LEGACY_DEVICES_PATH,
    V2_DEVICE_APPS_PATH,
)
from ..times import iso
from .walk import planned_walk

log = logging.getLogger("esper_warehouse.source")


def device_count(client: EsperClient) -> int | None:
    """The API's device count: offset mode with limit=1 (cursor pages carry no count)."""
    body = client.get(DEVICES.path, {"limit": 1, "offset": 0})
    return parse_page(body, where=DEVICES.path).count


@dlt.resource(**DEVICES.hints())
def devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table | None]:
    """The list paged by the API's page cursor, newest `updated_at` first; the read stops at the
    watermark less the lag (`EarlyStop`), or reads everything (a full scan).

    A full scan reads the run's `DeviceWalk` (`RunPlan.walk`): the whole list, or its next part
    when the scan is committed in parts (`walk.py`). The part that ends the walk checks it
    against the API's count; if devices are missing (a device that changes while the scan runs
    moves to the head of the list, behind the page cursor), the list is read a second time.
    Only then does the watermark move.
    """
    bind_retries(ledger)  # every part: the parts refused before are asked again
    since = read_from("devices", opts.lag, ledger)
    if since is None:
        yield from _full_scan(client, ledger, opts)
        return
    software = _software(client, ledger, opts)
    stop = EarlyStop(DEVICES.cursor_field, since)  # an incremental read: it stops early, no count
    loaded = _loaded(ledger, opts)
    owed = ledger.refusals.to_retry(DEVICE_APPS.name)
    retry = set(owed)
    pages = iter_pages(
        client,
        DEVICES.path_for(client),
        limit=DEVICES.limit(opts.page_size),
        paginator=DEVICES.paginator,
    )
    seen: set[tuple[Any, ...]] = set()
    for _page, fresh in stop.pages(pages):
        items = first_seen(DEVICES.require(fresh, ledger), seen, DEVICES.key)
        for item in items:
            repeat = is_loaded(loaded, item["id"], item.get(DEVICES.cursor_field))
            if not repeat or str(item["id"]) in retry:
                ledger.devices.changed(item["id"], apps_route(item))
            with_software(item, software)
        if items:
            yield DEVICES.page(items, ledger)
    listed = {key[0] for key in seen}
    # a device is asked again for its apps, so only by a run that reads apps: a selection
    # without them (`run --resources devices`) would re-read every owed device each night
    asked_again = (
        [d for d in owed if d not in listed] if ledger.plan.reads(DEVICE_APPS.name) else []
    )
    yield from _asked_again(client, ledger, asked_again, software)
    _owe_unselected(ledger)
    ledger.data_clock.saw(stop.newest)
    advance_watermark("devices", stop.newest)
    kept_state()[DEVICES_INCREMENTAL_AT] = iso(ledger.plan.as_of or datetime.now().astimezone())


def _loaded(ledger: RunLedger, opts: Options) -> dict[str, Any]:
    """The device versions the warehouse holds within the incremental read's lag: a device
    listed again at the version loaded is no news (its apps and feed were read then)."""
    since = read_from("devices", opts.lag, ledger)
    return loaded_versions(ledger, DEVICES.name, DEVICES.cursor_field, since)


def read_loaded(ledger: RunLedger, opts: Options) -> None:
    """Read the versions `devices` tells news from, in the thread building the source."""
    _loaded(ledger, opts)


def _full_scan(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table | None]:
    """This run's part of the complete device list; the part that ends it checks the count."""
    plan = ledger.plan
    walk, scope = planned_walk(ledger), plan.fan_out_scope  # walk.py, scope.py
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
            yield DEVICES.page(items, ledger)

    yield from pages(walk.take(needs))
    _owe_unselected(ledger)
    if not plan.completed_full_scan:  # kept from the first part until the first load ends
        kept_state().setdefault(FIRST_LOAD_STARTED, iso(plan.as_of or datetime.now(UTC)))
    if not walk.exhausted or not plan.building_last:
        # a part: the next one goes on from here. A part whose walk reached the list's end is
        # not the last part either (that one reads the catalogues): the count, the watermark and
        # `devices_full_scan_at` are committed with the last part, beside the census, so that
        # a kill during the last part leaves a first load unfinished, not an incremental one.
        return
    count = device_count(client)
    set_aside = ledger.rejected.count(DEVICES.name)  # listed without an id: not in `seen`
    if count is not None and len(walk.seen) + set_aside < count:
        log.info(
            "devices: %d read for a count of %d, reading the list again", len(walk.seen), count
        )
        yield from pages(walk.again(needs))
    ledger.scans.expect("devices", count if count is not None else len(walk.seen))
    ledger.scans.add("devices", 0, ({"id": i} for i in walk.seen), ("id",))
    advance_watermark("devices", walk.newest)
    kept_state()[DEVICES_FULL_SCAN_AT] = iso(plan.as_of or datetime.now().astimezone())


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


def _owe_unselected(ledger: RunLedger) -> None:
    """A selection that reads devices without their apps or feeds (`run --resources devices`)
    moves the devices' watermark past changes those tables never saw: each device this run read
    is owed to them, and the next run reads it as it reads a refused part."""
    for table in (DEVICE_APPS.name, "device_events"):
        if not ledger.plan.reads(table):
            ledger.refusals.owe(table, ledger.devices.changed_ids())


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
        yield DEVICES.page(items, ledger)


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
    census_at, walk = ledger.plan.as_of, planned_walk(ledger)  # (full scans only)
    rows = [{"id": i, "updated_at": u, "census_at": census_at} for i, u in walk.seen.items()]
    for start in range(0, len(rows), ROWS_PER_BATCH):
        yield DEVICE_CENSUS.page(rows[start : start + ROWS_PER_BATCH], ledger)


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
        yield DEVICE_APPS.page(rows, ledger, row_hash=True)
