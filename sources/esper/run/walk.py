"""A full scan's walk of the device list, handed out in parts that are committed one by one.

A first load of a big tenant takes hours: about 2 requests per device, so 150,000 devices at the
25 requests/s Esper's own client allows itself take 3.4 hours. dlt commits a run's rows and its
state together at the end of a load, so a run killed after hours would start again from zero.

When a full scan lists more devices than `commit_every_devices`, the pipeline runs it in parts
(`pipelines.runner`). The device list is walked once per run; each part takes the next devices
of the walk until `commit_every_devices` of them need their apps and event feed read (the scan's
`weekly.FanOutScope`), fetches those, and is loaded and committed before the next part starts.
The last part reads everything else (catalogues, commands, operations, heartbeats, the census)
and checks the device count. Only the last part writes the devices cursor.

A run killed part-way leaves its committed parts in the warehouse. The next run is therefore a
full scan again; its fan-out scope skips the devices the warehouse already holds at their listed
version. It walks the device list again (one request per 1,000 devices) and fetches only what
was not committed: docs/decisions.md, "Resumable first loads".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..http import EsperClient
from ..http.pages import DescScan, iter_cursor_pages
from ..http.reads import first_seen
from ..tables.devices import DEVICES


@dataclass
class DeviceWalk:
    """The complete device list, read page by page (newest `updated_at` first), in parts.

    Args:
        client: the run's client.
        path: the device list route.
        limit: items per page.
        part_devices: devices needing a fan-out per part; None reads the whole list as one part.
    """

    client: EsperClient
    path: str
    limit: int
    part_devices: int | None = None
    seen: dict[str, Any] = field(default_factory=dict)  # id -> listed `updated_at`
    parts: int = 0  # parts handed out so far
    exhausted: bool = False
    newest: datetime | None = None  # the newest `updated_at` listed: the cursor once complete
    _keys: set[tuple[Any, ...]] = field(default_factory=set, repr=False)
    _scan: DescScan = field(
        default_factory=lambda: DescScan(DEVICES.cursor_field, None), repr=False
    )
    _pages: Iterator[list[dict]] | None = field(default=None, repr=False)
    _held: list[dict] = field(default_factory=list, repr=False)

    @property
    def parted(self) -> bool:
        """Whether this scan is committed in several parts (more devices than one part holds)."""
        return self.part_devices is not None

    def has_more(self) -> bool:
        """Whether devices remain to be handed out (reads the next page if none is held)."""
        if not self._held and not self.exhausted:
            self._held = next(self._walk(), [])
            self.exhausted = not self._held
        return bool(self._held)

    def take(self, needs: Callable[[dict], bool]) -> Iterator[list[dict]]:
        """The next part, page by page: until `part_devices` devices for which `needs` is true.

        Every listed device is handed out once per run (a moving window can serve one twice);
        `needs` decides (and records) whether its apps and feed are read in this scan.
        """
        self.parts += 1
        wanted = 0
        while self.part_devices is None or wanted < self.part_devices:
            if not self.has_more():
                return
            page, taken = self._held, 0
            for item in page:
                taken += 1
                if needs(item):
                    wanted += 1
                    if self.part_devices is not None and wanted >= self.part_devices:
                        break
            self._held = page[taken:]
            yield page[:taken]

    def again(self, needs: Callable[[dict], bool]) -> Iterator[list[dict]]:
        """The whole list read once more: the devices not handed out yet (a short first walk).

        A device that changes while the list is walked moves ahead of the cursor; a walk that
        counted fewer devices than the API reads the list again for them.
        """
        if self._pages is not None:
            self._pages.close()  # ends the first walk's read-ahead
        self._pages, self._held, self.exhausted = None, [], False
        self._scan = DescScan(DEVICES.cursor_field, None)
        part, self.part_devices = self.part_devices, None
        try:
            yield from self.take(needs)
        finally:
            self.part_devices = part

    def _walk(self) -> Iterator[list[dict]]:
        if self._pages is None:
            pages = iter_cursor_pages(self.client, self.path, limit=self.limit)
            self._pages = self._fresh(self.client.read_ahead(pages))
        return self._pages

    def _fresh(self, pages: Any) -> Iterator[list[dict]]:
        for _page, items in self._scan.pages(pages):
            self.newest = max(filter(None, (self.newest, self._scan.newest)), default=None)
            fresh = first_seen(items, self._keys, ("id",))
            for item in fresh:
                self.seen[str(item.get("id"))] = item.get(DEVICES.cursor_field)
            if fresh:
                yield fresh
