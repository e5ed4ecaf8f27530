"""Per-device event watermarks: where a device's feed was read to, taken from the warehouse.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import dlt

from .common import cursor_of
from .pagination import Page
from .scan import parse_time

log = logging.getLogger("esper_warehouse.source")

TABLE = "device_events"
CURSOR = cursor_of(TABLE)  # `created_on` (settings.ENDPOINTS)


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
            table = client.make_qualified_table_name(TABLE)
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
        for item in page.items:
            key = item.get("id")
            self.items[key] = item  # an arrival while paging repeats an item: one row per id
            if self.is_new(item):
                self.new.add(key)
            elif self.mark is not None:
                ts = parse_time(item.get(CURSOR))
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
