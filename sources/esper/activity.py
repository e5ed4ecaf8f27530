"""What happens on devices: command requests and statuses, operations, device event feeds."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa

from .common import (
    ROWS_PER_BATCH,
    Options,
    advance_cursor,
    cursor_of,
    cursor_state,
    endpoint_path,
    hints_of,
    page_limit,
    page_table,
    read_from,
    skip_refused_device,
)
from .http import EsperClient, EsperError, EsperNotFoundError
from .ledger import RunLedger
from .pagination import iter_pages
from .scan import (
    DescScan,
    batches,
    fan_out,
    first_seen,
    parse_time,
    read_all,
    read_all_or_gone,
    url_id,
)
from .settings import ENDPOINTS
from .vocabulary import is_terminal
from .watermarks import FeedScan, event_marks

log = logging.getLogger("esper_warehouse.source")

# Cursors taken from the data: the newest `updated_at` read (the `*_as_of` names before them held
# the API's clock, which can run ahead of the data; a new name starts each one afresh).
STATUSES_SEEN = "command_statuses_updated_at"
OPERATION_DEVICES_SEEN = "operation_devices_updated_at"

# --------------------------------------------------------------- commands and operations


def _desc_list(
    table: str,
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    params: dict | None = None,
    *,
    fallback: str | None = None,
) -> Iterator[tuple[pa.Table, list[dict]]]:
    """A list read newest first by the table's cursor, with an early stop; a complete read is
    reconciled. `fallback`: the field read where an item lacks the cursor."""
    since = read_from(table, opts.lag, ledger)
    scan = DescScan((cursor_of(table), fallback) if fallback else cursor_of(table), since)
    key = ENDPOINTS[table].key
    seen: set[tuple[Any, ...]] = set()
    count = 0
    pages = iter_pages(client, endpoint_path(table, client), params, limit=page_limit(table, opts))
    for page, fresh in scan.pages(pages):
        count = max(count, page.count or 0)
        items = first_seen(fresh, seen, key)  # a complete read keeps every item as fresh
        if items:
            yield page_table(table, items), items
    if since is None:  # a complete read of the whole list: reconcile it with its count
        ledger.add_scan(table, count, (dict(zip(key, k, strict=True)) for k in seen), key)
    advance_cursor(table, scan.newest)


@dlt.resource(**hints_of("command_requests"))
def command_requests(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Newest first is not documented: stop early only while the observed order supports it."""
    for table, fresh in _desc_list("command_requests", client, ledger, opts, fallback="created_on"):
        ledger.new_requests.update(i["id"] for i in fresh)
        yield table


@dlt.resource(**hints_of("command_statuses"))
def command_statuses(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Statuses of requests new in this run or still open, `request=` batches fetched together.

    The open request ids are kept in dlt state; a request leaves it once all its statuses are
    terminal (sql/vocabulary/work_states.csv: Success, Failure, TimeOut, Cancelled).
    """
    state = cursor_state()
    requests = set(state.get("open_requests", [])) | ledger.new_requests
    # Which statuses moved since the last run: the newest `updated_at` it read (data, not the
    # API's clock, which may run ahead of its data) minus the lag.
    active_since = read_from(STATUSES_SEEN, opts.lag, ledger, also_full=True)
    newest: datetime | None = None
    limit, key = page_limit("command_statuses", opts), ENDPOINTS["command_statuses"].key
    cursor = cursor_of("command_statuses")

    def fetch(batch: list[str]) -> Any:
        return read_all(
            client,
            endpoint_path("command_statuses", client),
            {"request": ",".join(batch)},
            limit=limit,
            key=key,
        )

    open_requests = {r for r in requests if r in ledger.new_requests}  # no statuses yet: retry once
    closed: set[str] = set()
    for _batch, read in fan_out(client, batches(sorted(requests), opts.status_batch_size), fetch):
        ledger.add_scan("command_statuses", read.count, read.items, key)
        for item in read.items:
            (closed if is_terminal("command", item.get("state")) else open_requests).add(
                item.get("request")
            )
            ts = parse_time(item.get(cursor))
            newest = max(filter(None, (newest, ts)), default=None)
            if active_since is None or ts is None or ts >= active_since:
                ledger.mark_active([url_id(item.get("device"))])
        if read.items:
            yield page_table("command_statuses", read.items)
    state["open_requests"] = sorted(r for r in open_requests if r)
    advance_cursor(STATUSES_SEEN, newest)


@dlt.resource(**hints_of("operations"))
def operations(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """`ordering=-updated_at`: stop at watermark - lag."""
    ordering = {"ordering": f"-{cursor_of('operations')}"}
    for table, fresh in _desc_list("operations", client, ledger, opts, ordering):
        ledger.changed_operations.update({i["id"]: i.get("state") for i in fresh})
        yield table


@dlt.resource(**hints_of("operation_devices"))
def operation_devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Per-device rows of operations new in this run or not yet terminal."""
    state = cursor_state()
    previously_open = set(state.get("open_operations", []))
    changed = ledger.changed_operations
    active_since = read_from(OPERATION_DEVICES_SEEN, opts.lag, ledger, also_full=True)
    newest: datetime | None = None
    key, limit = ENDPOINTS["operation_devices"].key, page_limit("operation_devices", opts)
    cursor = cursor_of("operation_devices")

    def fetch(operation_id: str) -> Any:
        return read_all_or_gone(
            client, endpoint_path("operation_devices", client, operation_id), limit=limit
        )

    rows: list[dict] = []
    gone: set[str] = set()
    for operation_id, read in fan_out(client, sorted(previously_open | set(changed)), fetch):
        if read is None:
            gone.add(operation_id)
            continue
        ledger.add_scan("operation_devices", read.count, read.items, key)
        for item in read.items:
            ts = parse_time(item.get(cursor))
            newest = max(filter(None, (newest, ts)), default=None)
            if active_since is None or ts is None or ts >= active_since:
                ledger.mark_active([item.get("device_id")])
        rows.extend(read.items)
        if len(rows) >= ROWS_PER_BATCH:
            yield page_table("operation_devices", rows)
            rows = []
    if rows:
        yield page_table("operation_devices", rows)
    still_open = {o for o, s in changed.items() if not is_terminal("operation", s)}
    state["open_operations"] = sorted((previously_open - set(changed) - gone) | still_open)
    advance_cursor(OPERATION_DEVICES_SEEN, newest)


# ------------------------------------------------------------------------------ device events


def _event_feeds(
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    device_ids: list[str],
    *,
    bulk: bool = False,
) -> Iterator[pa.Table]:
    """The event feeds of `device_ids`, fetched concurrently, newest first.

    A first load reads every feed to its end. Later runs stop each feed at the device's watermark
    in the warehouse (`watermarks.FeedScan`: the feed's count and the event ids, never a clock),
    so events uploaded days after their `created_on` are found too; a weekly full scan reads
    the feeds of its rotating slice whole (`weekly.FanOutScope`).
    Both forms of `device_events` below read feeds through this function (`bulk`: see `fan_out`).
    """
    scope = ledger.fan_out_scope  # full scans: first load (every feed whole) or weekly
    marks = None if scope is not None and scope.everything else _marks(ledger)
    with ledger._lock:
        ledger.feeds_read.update(device_ids)
    limit = page_limit("device_events", opts)

    def fetch(device_id: str) -> tuple[list[dict], int, bool] | None:
        whole = not marks or (scope is not None and scope.in_rotation(device_id))
        scan = FeedScan(None if whole else marks.get(device_id))
        try:
            path = endpoint_path("device_events", client, device_id)
            for _page in scan.pages(iter_pages(client, path, limit=limit)):
                pass
        except EsperNotFoundError as error:
            if error.tenant_level:
                raise
            return None  # the device was removed
        except EsperError as error:
            if skip_refused_device(ledger, "device_events", error):
                return None  # counted; nothing loaded, so its watermark stays
            raise
        # One row per event id (`FeedScan` keys them): an event arriving while the feed is paged
        # shifts the offsets and repeats an item on the next page (events load insert-only).
        return scan.result(), scan.count, not scan.stopped

    rows: list[dict] = []
    for device_id, result in fan_out(client, device_ids, fetch, bulk=bulk):
        if result is None:
            continue
        items, count, complete = result
        items = [{**i, "device_id": device_id} for i in items]
        if complete:
            ledger.add_scan("device_events", count, items, ENDPOINTS["device_events"].key)
        rows.extend(items)
        if len(rows) >= ROWS_PER_BATCH:
            yield page_table("device_events", rows)
            rows = []
    if rows:
        yield page_table("device_events", rows)


def _marks(ledger: RunLedger) -> dict[str, Any] | None:
    """The devices' event watermarks in the warehouse, read once per run (all parts share it)."""
    with ledger._lock:
        if not ledger.event_marks_read:
            ledger.event_marks, ledger.event_marks_read = event_marks(), True
        return ledger.event_marks


@dlt.resource(**hints_of("device_events"))
def device_events(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Event feeds of the devices with activity in this run (incremental runs, weekly scans).

    Activity = a device that changed (devices scan), a command status or an operation-device row
    updated since the last run. Events accrue only for such devices, so the others cannot have
    new ones. This resource runs last (`next_item_mode = "fifo"`) because it reads the activity
    the other resources noted in the ledger.
    """
    # A run resuming an unfinished first load (walk.py) holds the feeds of the devices it skips
    # as they were when their part committed: activity since then (`ledger.resumed_from`) counts.
    counts = ledger.completed_full_scan or not ledger.full_scan or ledger.resumed_from is not None
    active = ledger.active_devices if counts else set()
    targets = sorted((set(ledger.changed_devices) | active) - ledger.feeds_read)
    yield from _event_feeds(client, ledger, opts, targets)


@dlt.transformer(**hints_of("device_events"), parallelized=True)
def device_events_of_page(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Full scans: the whole event feed of every device in a page of the device scan.

    On a full scan every listed device needs its feed, so the feeds need not wait for the
    activity of the other resources: they are fetched per device page, in the background
    (`parallelized`: a dlt worker thread) together with the page's installed apps, while the
    rest of the source extracts. Devices seen only in command statuses or operations are not
    in the (complete) device list because they were removed: their feeds would answer 404.
    A full scan in parts (`walk.py`) reads here the feeds of the devices in its scope.
    """
    wanted = [d for d in page.column("id").to_pylist() if d in ledger.changed_devices]
    yield from _event_feeds(client, ledger, opts, wanted, bulk=True)
