"""The resources of the Esper source: one function per table, its contract in its decorator.

Cursors live in the source's dlt state (`cursors`), written only after a resource has yielded
everything it read, so a run that fails part-way leaves them where they were (dlt commits state
together with the load package). Every page becomes an Arrow table through `arrow.to_arrow`.
Fan-out over devices, requests and operations goes through `client.map` (concurrent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import dlt
import pyarrow as pa

from .arrow import to_arrow
from .client import EsperClient, EsperNotFoundError
from .ledger import RunLedger
from .pagination import iter_cursor_pages, iter_pages, parse_page
from .scan import DescScan, batches, fan_out, iso, parse_time, read_all, read_all_or_gone, url_id
from .schemas import SCHEMAS
from .settings import (
    ENDPOINTS,
    TERMINAL_COMMAND_STATES,
    TERMINAL_OPERATION_STATES,
    V2_DEVICE_APPS_PATH,
)

log = logging.getLogger("esper_warehouse.source")

ROWS_PER_BATCH = 20_000  # fan-out rows gathered into one Arrow table before it goes to dlt


@dataclass(frozen=True)
class Options:
    """The settings the resources read (see `settings.py` for their defaults)."""

    lag: timedelta
    status_batch_size: int
    heartbeat_start: timedelta
    page_size: int | None = None  # None: each endpoint's own (the largest the route allows)


def hints(table: str) -> dict[str, Any]:
    """The column hints of a table's declared schema."""
    return SCHEMAS[table].dlt_columns()


def _cursors() -> dict[str, Any]:
    return dlt.current.source_state().setdefault("cursors", {})  # type: ignore[no-any-return]


def _since(name: str, lag: timedelta, ledger: RunLedger) -> datetime | None:
    """Where an incremental read starts: the stored watermark minus the lag; None = everything."""
    mark = _cursors().get(name)
    if ledger.full_scan or not mark:
        return None
    return parse_time(mark) - lag  # type: ignore[operator]


def _advance(name: str, newest: datetime | None) -> None:
    """Move a watermark forward (never back) once everything up to it has been yielded."""
    if newest is None:
        return
    state = _cursors()
    old = parse_time(state.get(name))
    if old is None or newest > old:
        state[name] = iso(newest)


def _limit(table: str, opts: Options) -> int:
    return min(opts.page_size or ENDPOINTS[table].page_size, ENDPOINTS[table].page_size)


def _path(table: str, client: EsperClient, parent: str | None = None) -> str:
    return ENDPOINTS[table].path.format(eid=client.enterprise_id, id=parent)


def _arrow(table: str, items: list[dict], **kwargs: Any) -> pa.Table:
    return to_arrow(items, SCHEMAS[table], **kwargs)


def device_count(client: EsperClient) -> int | None:
    """The API's device count: offset mode with limit=1 (cursor pages carry no count)."""
    body = client.get(ENDPOINTS["devices"].path, {"limit": 1, "offset": 0})
    return parse_page(body, where=ENDPOINTS["devices"].path).count


def check_enterprise(client: EsperClient) -> None:
    """One tenant-level legacy request: a wrong enterprise id fails here, clearly (404)."""
    client.get(_path("groups", client), {"limit": 1, "offset": 0})


def apps_route(item: dict) -> str | None:
    """Where a device's apps are listed: Android legacy route, Apple/Windows v2, else none."""
    platform = f"{item.get('platform')} {item.get('os')}".lower()
    if "android" in platform:
        return "legacy"
    if any(p in platform for p in ("apple", "ios", "windows", "tvos", "macos")):
        return "v2"
    return None


# ---------------------------------------------------------------------------------- devices


@dlt.resource(name="devices", primary_key="id", write_disposition="merge", columns=hints("devices"))
def devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Cursor pages, newest `updated_at` first; stop at watermark - lag, or read all (full scan).

    A full scan is checked against the API's count; if devices are missing (a device that
    changes while the scan runs moves ahead of the cursor), the list is read a second time.
    """
    limit = _limit("devices", opts)
    since = _since("devices", opts.lag, ledger)
    seen: set[str] = set()
    newest: datetime | None = None
    for attempt in (1, 2):
        scan = DescScan("updated_at", since)
        for page, fresh in scan.pages(
            iter_cursor_pages(client, _path("devices", client), limit=limit)
        ):
            if since is not None:
                items = fresh  # incremental: only what changed since watermark - lag
            elif attempt == 2:
                items = [i for i in page.items if i.get("id") not in seen]
            else:
                items = page.items
            for item in fresh:
                ledger.changed_devices[item["id"]] = apps_route(item)
            seen.update(i["id"] for i in page.items)
            if items:
                yield _arrow("devices", items)
        newest = max(filter(None, (newest, scan.newest)), default=None)
        if since is not None:
            break  # an incremental read: not a complete list, nothing to reconcile
        count = device_count(client)
        ledger.set_expected("devices", count if count is not None else len(seen))
        if count is None or len(seen) >= count or attempt == 2:
            break
        log.info("devices: %d read for a count of %d, reading the list again", len(seen), count)
    if since is None:
        ledger.add_scan("devices", 0, ({"id": i} for i in seen), ("id",))
    _advance("devices", newest)
    _cursors()["devices_full_scan_at" if since is None else "devices_incremental_at"] = iso(
        ledger.as_of or datetime.now().astimezone()
    )


@dlt.transformer(
    name="device_history",
    primary_key=("id", "updated_at"),
    write_disposition="merge",
    columns=hints("device_history"),
)
def device_history(page: pa.Table) -> Iterator[pa.Table]:
    """Every device version the devices scan sees (one row per id and `updated_at`)."""
    yield page


@dlt.transformer(name="device_census", write_disposition="replace", columns=hints("device_census"))
def device_census(page: pa.Table, ledger: RunLedger) -> Iterator[pa.Table]:
    """The devices present in this complete scan (only attached to full scans)."""
    census_at = pa.array([ledger.as_of] * page.num_rows, pa.timestamp("us", tz="UTC"))
    yield page.select(["id", "updated_at"]).append_column("census_at", census_at)


@dlt.transformer(
    name="device_apps",
    merge_key="device_id",
    write_disposition={"disposition": "merge", "strategy": "scd2"},  # boundary set per run
    columns={**hints("device_apps"), "_row_hash": {"data_type": "text", "nullable": False}},
)
def device_apps(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Each changed device's complete app list (Android: legacy route; Apple/Windows: v2).

    scd2 with merge key `device_id`: an app missing from its device's new list is retired
    (`_dlt_valid_to` = this run's API time); devices not in this run are left as they were.
    """
    targets = [
        (d, ledger.changed_devices[d])
        for d in page.column("id").to_pylist()
        if ledger.changed_devices.get(d)
    ]
    limit = _limit("device_apps", opts)

    def fetch(target: tuple[str, str]) -> Any:
        device_id, route = target
        path = (
            _path("device_apps", client, device_id)
            if route == "legacy"
            else (V2_DEVICE_APPS_PATH.format(id=device_id))
        )
        return read_all_or_gone(client, path, limit=limit)

    rows: list[dict] = []
    for (device_id, route), read in fan_out(client, targets, fetch):
        if read is None:
            continue
        items = [{**i, "device_id": device_id, "route": route} for i in read.items]
        ledger.add_scan("device_apps", read.count, items, ("device_id", "id"))
        rows.extend(items)
    if rows:
        yield _arrow("device_apps", rows, row_hash=True)


@dlt.resource(
    name="heartbeats",
    primary_key=("device_id", "timestamp"),
    write_disposition="merge",
    columns=hints("heartbeats"),
)
def heartbeats(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Last-seen observations in the window (watermark - lag, the API's now)."""
    now = ledger.as_of
    assert now is not None
    start = _since("heartbeats", opts.lag, ledger) or now - opts.heartbeat_start
    params = {"last_seen_gt": iso(start), "last_seen_lt": iso(now)}
    key = ("device_id", "timestamp")
    read = read_all(
        client,
        _path("heartbeats", client),
        params,
        limit=_limit("heartbeats", opts),
        key=key,
        parallel=True,
    )
    ledger.add_scan("heartbeats", read.count, read.items, key)
    if read.items:
        yield _arrow("heartbeats", read.items)
    _advance("heartbeats", now)


# ------------------------------------------------------------------- groups, blueprints, apps


def _whole_list(
    table: str, client: EsperClient, ledger: RunLedger, opts: Options, params: dict | None = None
) -> Iterator[pa.Table]:
    key = ENDPOINTS[table].key
    read = read_all(
        client, _path(table, client), params, limit=_limit(table, opts), key=key, parallel=True
    )
    ledger.add_scan(table, read.count, read.items, key)
    if read.items:
        yield _arrow(table, read.items)


def _versions(
    table: str,
    parent_ids: Iterable[str],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    parent_column: str | None = None,
    params: dict[str, dict] | None = None,
) -> Iterator[pa.Table]:
    """Each parent's complete list of versions, fetched concurrently; None for parents gone."""
    key, limit = ENDPOINTS[table].key, _limit(table, opts)

    def fetch(parent: str) -> Any:
        return read_all_or_gone(
            client, _path(table, client, parent), (params or {}).get(parent), limit=limit, key=key
        )

    rows: list[dict] = []
    for parent, read in fan_out(client, parent_ids, fetch):
        if read is None:
            ledger.application_ids.discard(parent)
            continue
        items = [{**i, parent_column: parent} for i in read.items] if parent_column else read.items
        ledger.add_scan(table, read.count, items, key)
        rows.extend(items)
    if rows:
        yield _arrow(table, rows)


@dlt.resource(name="groups", primary_key="id", write_disposition="replace", columns=hints("groups"))
def groups(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Device groups: a small list, replaced each run."""
    yield from _whole_list("groups", client, ledger, opts)


@dlt.resource(
    name="blueprints", primary_key="id", write_disposition="merge", columns=hints("blueprints")
)
def blueprints(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Blueprints (their latest version each): merged each run."""
    yield from _whole_list("blueprints", client, ledger, opts)


@dlt.transformer(
    name="blueprint_versions",
    primary_key="version_id",
    write_disposition="merge",
    columns=hints("blueprint_versions"),
)
def blueprint_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every blueprint."""
    yield from _versions("blueprint_versions", page.column("id").to_pylist(), client, ledger, opts)


@dlt.resource(
    name="tenant_apps", primary_key="id", write_disposition="merge", columns=hints("tenant_apps")
)
def tenant_apps(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Tenant apps (Apple, Windows): merged each run."""
    yield from _whole_list("tenant_apps", client, ledger, opts)


@dlt.transformer(
    name="tenant_app_versions",
    primary_key="id",
    write_disposition="merge",
    columns=hints("tenant_app_versions"),
)
def tenant_app_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every tenant app."""
    ids = page.column("id").to_pylist()
    yield from _versions("tenant_app_versions", ids, client, ledger, opts, "app_id")


@dlt.resource(
    name="applications", primary_key="id", write_disposition="merge", columns=hints("applications")
)
def applications(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Legacy (Android) applications updated since watermark - lag (all on a full scan)."""
    since = _since("applications", opts.lag, ledger)
    params = {"updated_on_gt": iso(since)} if since else None
    key = ("id",)
    read = read_all(
        client,
        _path("applications", client),
        params,
        limit=_limit("applications", opts),
        key=key,
        parallel=True,
    )
    ledger.add_scan("applications", read.count, read.items, key)
    ledger.application_ids.update(i["id"] for i in read.items)
    if read.items:
        yield _arrow("applications", read.items)
    _advance(
        "applications",
        max(filter(None, map(parse_time, _col(read.items, "updated_on"))), default=None),
    )


@dlt.resource(
    name="application_versions",
    primary_key="id",
    write_disposition="merge",
    columns=hints("application_versions"),
)
def application_versions(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Versions of every known legacy application, updated since watermark - lag."""
    state = _cursors()
    known = set(state.get("application_ids", []))
    since = _since("application_versions", opts.lag, ledger)
    apps = known | ledger.application_ids
    ledger.application_ids = set(apps)
    # Applications not seen before are read whole; known ones only since the watermark.
    params = {a: {"updated_on_gt": iso(since)} for a in known} if since else {}
    newest: datetime | None = None
    for table in _versions(
        "application_versions", sorted(apps), client, ledger, opts, "application_id", params
    ):
        newest = max(
            filter(None, (newest, *map(parse_time, _col_arrow(table, "updated_on")))), default=None
        )
        yield table
    state["application_ids"] = sorted(ledger.application_ids)
    _advance("application_versions", newest)


def _col(items: list[dict], name: str) -> list[Any]:
    return [i.get(name) for i in items]


def _col_arrow(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else []


# --------------------------------------------------------------- commands and operations


def _desc_list(
    table: str,
    cursor: str | tuple[str, ...],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    params: dict | None = None,
) -> Iterator[tuple[pa.Table, list[dict]]]:
    """A list read newest first with an early stop; a complete read is reconciled."""
    since = _since(table, opts.lag, ledger)
    scan = DescScan(cursor, since)
    key = ENDPOINTS[table].key
    seen: list[dict] = []
    count = 0
    pages = iter_pages(client, _path(table, client), params, limit=_limit(table, opts))
    for page, fresh in scan.pages(pages):
        count = max(count, page.count or 0)
        seen.extend({k: i.get(k) for k in key} for i in page.items)
        items = page.items if since is None else fresh
        if items:
            yield _arrow(table, items), items
    if since is None:  # a complete read of the whole list: reconcile it with its count
        ledger.add_scan(table, count, seen, key)
    _advance(table, scan.newest)


@dlt.resource(
    name="command_requests",
    primary_key="id",
    write_disposition="merge",
    columns=hints("command_requests"),
)
def command_requests(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Newest first is not documented: stop early only while the observed order supports it."""
    for table, fresh in _desc_list(
        "command_requests", ("created_at", "created_on"), client, ledger, opts
    ):
        ledger.new_requests.update(i["id"] for i in fresh)
        yield table


@dlt.resource(
    name="command_statuses",
    primary_key="id",
    write_disposition="merge",
    columns=hints("command_statuses"),
)
def command_statuses(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Statuses of requests new in this run or still open, `request=` batches fetched together.

    The open request ids are kept in dlt state; a request leaves it once all its statuses are
    terminal (Success, Failure, TimeOut, Cancelled).
    """
    state = _cursors()
    requests = set(state.get("open_requests", [])) | ledger.new_requests
    active_since = _since("command_statuses_as_of", opts.lag, ledger)
    limit, key = _limit("command_statuses", opts), ("id",)

    def fetch(batch: list[str]) -> Any:
        return read_all(
            client,
            _path("command_statuses", client),
            {"request": ",".join(batch)},
            limit=limit,
            key=key,
        )

    open_requests = {r for r in requests if r in ledger.new_requests}  # no statuses yet: retry once
    closed: set[str] = set()
    for _batch, read in fan_out(client, batches(sorted(requests), opts.status_batch_size), fetch):
        ledger.add_scan("command_statuses", read.count, read.items, key)
        for item in read.items:
            (closed if item.get("state") in TERMINAL_COMMAND_STATES else open_requests).add(
                item.get("request")
            )
            if active_since is None or (parse_time(item.get("updated_at")) or active_since) >= (
                active_since
            ):
                ledger.mark_active([url_id(item.get("device"))])
        if read.items:
            yield _arrow("command_statuses", read.items)
    state["open_requests"] = sorted(r for r in open_requests if r)
    _advance("command_statuses_as_of", ledger.as_of)


@dlt.resource(
    name="operations", primary_key="id", write_disposition="merge", columns=hints("operations")
)
def operations(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """`ordering=-updated_at`: stop at watermark - lag."""
    for table, fresh in _desc_list(
        "operations", "updated_at", client, ledger, opts, {"ordering": "-updated_at"}
    ):
        ledger.changed_operations.update({i["id"]: i.get("state") for i in fresh})
        yield table


@dlt.resource(
    name="operation_devices",
    primary_key="id",
    write_disposition="merge",
    columns=hints("operation_devices"),
)
def operation_devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Per-device rows of operations new in this run or not yet terminal."""
    state = _cursors()
    previously_open = set(state.get("open_operations", []))
    changed = ledger.changed_operations
    active_since = _since("operation_devices_as_of", opts.lag, ledger)
    key, limit = ("id",), _limit("operation_devices", opts)

    def fetch(operation_id: str) -> Any:
        return read_all_or_gone(
            client, _path("operation_devices", client, operation_id), limit=limit
        )

    rows: list[dict] = []
    gone: set[str] = set()
    for operation_id, read in fan_out(client, sorted(previously_open | set(changed)), fetch):
        if read is None:
            gone.add(operation_id)
            continue
        ledger.add_scan("operation_devices", read.count, read.items, key)
        for item in read.items:
            ts = parse_time(item.get("updated_at"))
            if active_since is None or ts is None or ts >= active_since:
                ledger.mark_active([item.get("device_id")])
        rows.extend(read.items)
        if len(rows) >= ROWS_PER_BATCH:
            yield _arrow("operation_devices", rows)
            rows = []
    if rows:
        yield _arrow("operation_devices", rows)
    still_open = {o for o, s in changed.items() if s not in TERMINAL_OPERATION_STATES}
    state["open_operations"] = sorted((previously_open - set(changed) - gone) | still_open)
    _advance("operation_devices_as_of", ledger.as_of)


# ------------------------------------------------------------------------------ device events


@dlt.resource(
    name="device_events",
    primary_key="id",
    write_disposition="merge",
    columns=hints("device_events"),
)
def device_events(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Event feeds of the devices with activity in this run, newest first, stop at the last run.

    Activity = a device that changed (devices scan; every device on a full scan), a command
    status or an operation-device row updated since the last run. Events accrue only for such
    devices, so the others cannot have new ones.
    """
    since = _since("device_events_as_of", opts.lag, ledger)
    targets = sorted(set(ledger.changed_devices) | ledger.active_devices)
    limit = _limit("device_events", opts)

    def fetch(device_id: str) -> tuple[list[dict], int, bool] | None:
        scan = DescScan("created_on", since)
        items: list[dict] = []
        count = 0
        try:
            path = _path("device_events", client, device_id)
            for page, fresh in scan.pages(iter_pages(client, path, limit=limit)):
                count = max(count, page.count or 0)
                items.extend(page.items if not scan.stopped else fresh)
        except EsperNotFoundError as error:
            if error.tenant_level:
                raise
            return None  # the device was removed
        return items, count, not scan.stopped

    rows: list[dict] = []
    for device_id, result in fan_out(client, targets, fetch):
        if result is None:
            continue
        items, count, complete = result
        items = [{**i, "device_id": device_id} for i in items]
        if complete:
            ledger.add_scan("device_events", count, items, ("id",))
        rows.extend(items)
        if len(rows) >= ROWS_PER_BATCH:
            yield _arrow("device_events", rows)
            rows = []
    if rows:
        yield _arrow("device_events", rows)
    _advance("device_events_as_of", ledger.as_of)
