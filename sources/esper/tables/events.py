"""Device event feeds, and where each device's feed was read to (its watermark in the warehouse).

An event feed is paged newest first by `created_on`. An event uploaded late (a device offline for
days, a server whose clock runs ahead of its data) carries an old `created_on` and lands deep in
the feed, below anything a time cursor would stop at. What a device's feed still holds that the
warehouse lacks is told by the data instead: the feed's `count` against the events loaded for the
device, and event ids above the highest loaded one (ids grow as events are stored). A device's
feed is paged until every new event is found, whatever its timestamp, and the order of the pages.

The marks are read from the destination (`device_id, max(id), count(*), max(created_on)`), not
kept in dlt state: 150,000 devices would put ~8 MB of JSON into the state that dlt rewrites
and stores with every load; the query answers in well under a second (docs/decisions.md,
"Cursors from the data").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa

from ..arrow import shown
from ..common import ROWS_PER_BATCH, Options, OtherParent, of_parent, refused_part
from ..http import EsperClient, EsperError, EsperResponseError
from ..http.pages import Page, fan_out, iter_pages, url_id
from ..run.ledger import RunLedger
from ..table import INT, TS, Col, Doc, Table, cols
from ..times import parse_time
from .commands import COMMAND_STATUSES, OPERATION_DEVICES
from .devices import DEVICES

log = logging.getLogger("esper_warehouse.source")

DEVICE_EVENTS = Table(
    "device_events",
    "/enterprise/{eid}/device/{id}/download/eventfeed/",
    ("id",),
    "created_on",
    disposition="insert-only",
    columns=(
        Col("id", INT),
        *cols("device_id message_id device_status_id message device enterprise"),
        Col("created_on", TS),
    ),
    # an incremental run reads the feeds of the devices with activity: the devices scan and
    # these tables note it in the run's ledger, so their resources must have run first
    after=("devices", COMMAND_STATUSES.name, OPERATION_DEVICES.name),
    needs=("devices",),  # read per device of this run's walk
    doc=Doc(
        kept="devices with activity in this run; each feed paged newest first down to that "
        "device's watermark in the warehouse (its highest event id and event count: never a "
        "clock, so late uploads and a skewed API clock lose nothing); every device on a first "
        "load or `run --full`; on the scheduled weekly scan, devices whose `updated_at` changed "
        "plus a rotating 1/20 of the fleet; and on every run, the devices whose feed an earlier "
        "run was refused",
        envelope="legacy-list (default limit 250)",
    ),
)
TABLES = (DEVICE_EVENTS,)
CURSOR = DEVICE_EVENTS.cursor_field

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
    in the warehouse (`FeedScan` below: the feed's count and the event ids, never a clock),
    so events uploaded days after their `created_on` are found too; a weekly full scan reads
    the feeds of its rotating slice whole (`scope.FanOutScope`).
    Both forms of `device_events` below read feeds through this function (`bulk`: see `fan_out`).
    """
    scope = ledger.plan.fan_out_scope  # full scans: first load (every feed whole) or weekly
    marks = None if scope is not None and scope.everything else _marks(ledger)
    ledger.feeds.reading(device_ids)
    limit = DEVICE_EVENTS.limit(opts.page_size)

    def fetch(device_id: str) -> tuple[list[dict], int, bool] | None:
        whole = not marks or (scope is not None and scope.in_rotation(device_id))
        scan = FeedScan(None if whole else marks.get(device_id), ledger)
        try:
            path = DEVICE_EVENTS.path_for(client, device_id)
            pages = iter_pages(client, path, limit=limit, paginator=DEVICE_EVENTS.paginator)
            for _page in scan.pages(pages):
                pass
        except EsperError as error:
            # refused (counted, asked again next run; nothing loaded, so its watermark stays),
            # or the device is gone (no longer listed)
            refused_part(ledger, client, DEVICE_EVENTS.name, DEVICES, device_id, error)
            return None
        # One row per event id (`FeedScan` keys them): an event arriving while the feed is paged
        # shifts the offsets and repeats an item on the next page (events load insert-only).
        items = of_parent(scan.result(), "device_id", device_id, _device_named)
        if isinstance(items, OtherParent):
            _refuse_feed(ledger, items)
            return None
        ledger.refusals.part_done(DEVICE_EVENTS.name, device_id)
        return items, scan.count, not scan.stopped

    rows: list[dict] = []
    for _device, result in fan_out(client, device_ids, fetch, bulk=bulk):
        if result is None:
            continue
        items, count, complete = result
        if complete:
            ledger.scans.add("device_events", count, items, DEVICE_EVENTS.key)
        rows.extend(items)
        if len(rows) >= ROWS_PER_BATCH:
            yield DEVICE_EVENTS.page(rows, ledger)
            rows = []
    if rows:
        yield DEVICE_EVENTS.page(rows, ledger)


def _device_named(item: dict) -> tuple[object, object]:
    """The device an event names: its `device_id`, if served, and its `device` link's id."""
    return item.get("device_id"), url_id(item.get("device"))


def _refuse_feed(ledger: RunLedger, other: OtherParent) -> None:
    """A feed whose events name another device: nothing of it is loaded (whose events are
    they?), the device is counted and asked again by the next run, as a refused feed is."""
    answer = EsperResponseError(
        f"GET {DEVICE_EVENTS.path} served events of another device",
        route=f"GET {DEVICE_EVENTS.path}",
        status=200,
    )
    meaning = "its events name another device than the one asked"
    ledger.refusals.skip_part(DEVICE_EVENTS.name, other.part, answer, meaning, noun="device")
    log.warning(
        "device_events: the feed of %s names %s: not loaded, asked again next run",
        shown(other.part),
        shown(other.value),
    )


def _marks(ledger: RunLedger) -> dict[str, EventMark] | None:
    """The devices' event watermarks in the warehouse, read once per run (all parts share it)."""
    return ledger.shared.read_once("event marks", event_marks)


@dlt.resource(**DEVICE_EVENTS.hints())
def device_events(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Event feeds of the devices with activity in this run (incremental runs, weekly scans).

    Activity = a device that changed (devices scan), a command status or an operation-device row
    updated since the last run. Events accrue only for such devices, so the others cannot have
    new ones. Plus the devices whose feed an earlier run was refused, until it answers. This
    resource starts once every other resource has ended (`next_item_mode = "fifo"`, and the
    whole tail waited for: `run/tail.py`) because it reads the activity the other resources
    noted in the run's ledger (`DeviceNews`, `FeedNews`).
    """
    plan = ledger.plan
    # A run resuming an unfinished first load (scan/walk.py) holds the feeds of the devices it skips
    # as they were when their part committed: activity since then (`RunPlan.resumed_from`) counts.
    counts = plan.completed_full_scan or not plan.full_scan or plan.resumed_from is not None
    active = ledger.feeds.active_devices() if counts else set()
    refused = set(ledger.refusals.to_retry(DEVICE_EVENTS.name))  # an earlier run's: asked again
    targets = ledger.feeds.unread(ledger.devices.changed_ids() | active | refused)
    yield from _event_feeds(client, ledger, opts, targets)


@dlt.transformer(**DEVICE_EVENTS.hints(), parallelized=True)
def device_events_of_page(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Full scans: the whole event feed of every device in a page of the device scan.

    On a full scan every listed device needs its feed, so the feeds need not wait for the
    activity of the other resources: they are fetched per device page, in the background
    (`parallelized`: a dlt worker thread) together with the page's installed apps, while the
    rest of the source extracts. Devices seen only in command statuses or operations are not
    in the (complete) device list because they were removed: their feeds would answer 404.
    A full scan in parts (`scan/walk.py`) reads here the feeds of the devices in its scope.
    """
    wanted = [d for d in page.column("id").to_pylist() if ledger.devices.is_changed(d)]
    yield from _event_feeds(client, ledger, opts, wanted, bulk=True)
    ledger.plan.page_read(
        DEVICE_EVENTS.name
    )  # a part limited by time hands out more (`scan/walk.py`)


# ------------------------------------------------------------------------------ watermarks


@dataclass(frozen=True)
class EventMark:
    """What the warehouse holds of one device's feed."""

    max_id: int
    count: int
    newest: datetime | None


def event_marks() -> dict[str, EventMark] | None:
    """Every device's mark from the destination of the running pipeline; None when unknown.

    None (no pipeline, no table yet, a destination that cannot answer) makes each feed read
    whole: more requests, never fewer rows.
    """
    try:
        pipeline = dlt.current.pipeline()
        with pipeline.sql_client() as client:
            if not client.has_dataset():
                return None
            table = client.make_qualified_table_name(DEVICE_EVENTS.name)
            rows = client.execute_sql(
                f"select device_id, max(id), count(*), max({CURSOR}) from {table} "
                "where device_id is not null group by device_id"
            )
    except Exception as error:  # a missing table or destination: read the feeds whole
        log.info(
            "device_events: no watermarks from the warehouse (%s): reading feeds whole",
            type(error).__name__,
        )
        return None
    marks: dict[str, EventMark] = {}
    for device_id, max_id, count, newest in rows or []:
        try:
            marks[str(device_id)] = EventMark(int(max_id), int(count), parse_time(newest))
        except (TypeError, ValueError):
            continue  # an id that is not a number: this device's feed is read whole
    return marks


@dataclass
class FeedScan:
    """Reads one device's feed newest first until everything the warehouse lacks is found.

    With a mark, paging stops after a page once both hold: the pages reached an event the
    warehouse already holds (`created_on` at or below the mark's newest), and the events above
    the mark's id number at least `count - mark.count`. The count makes it safe against late
    events deep in the feed and against pages that are not in order; the first condition keeps a
    feed whose count fell (old events dropped by the API) from stopping before it reached the
    events already loaded. Without a mark the feed is read to its end.
    """

    mark: EventMark | None
    ledger: RunLedger  # where an event without its id or time is set aside
    items: dict[Any, dict] = field(default_factory=dict)  # id -> item, every item read
    new: set[Any] = field(default_factory=set)
    count: int = 0
    reached: bool = False
    stopped: bool = False

    def is_new(self, item: dict) -> bool:
        if self.mark is None:
            return True
        try:
            return int(item["id"]) > self.mark.max_id
        except (KeyError, TypeError, ValueError):
            return True

    def add(self, page: Page) -> None:
        """Take one page; decide whether the feed needs more pages."""
        self.count = max(self.count, page.count or 0)
        for item in DEVICE_EVENTS.require(page.items, self.ledger):
            key = item.get("id")
            self.items[key] = item  # an arrival while paging repeats an item: one row per id
            if self.is_new(item):
                self.new.add(key)
            elif self.mark is not None:
                ts = DEVICE_EVENTS.cursor_time(item)
                if self.mark.newest is None or ts is None or ts <= self.mark.newest:
                    self.reached = True
        if self.mark is not None and self.reached and page.has_more:
            self.stopped = len(self.new) >= self.count - self.mark.count

    def pages(self, pages: Iterable[Page]) -> Iterable[Page]:
        """Walk `pages` until the stop rule applies (the rest is never requested)."""
        for page in pages:
            self.add(page)
            yield page
            if self.stopped:
                return

    def result(self) -> list[dict]:
        """Stopped before the end: the new events; read to the end: every event (merged on id)."""
        if self.stopped:
            return [self.items[k] for k in self.new]
        return list(self.items.values())
