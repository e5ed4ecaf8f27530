"""A full scan's walk of the device list, handed out in parts that are committed one by one.

A first load of a big tenant takes hours: about 2 requests per device, so 150,000 devices at the
25 requests/s Esper's own client allows itself take 3.4 hours. dlt commits a run's rows and its
state together at the end of a load, so a run killed after hours would start again from zero.
A small tenant's first load can be slow too (a throttled or slow API), and a scheduler's time
limit kills it just the same.

So a full scan runs in parts (`pipelines.run.runner`) when it lists more devices than
`commit_every_devices`, or whenever `commit_every_minutes` is on (the default). The device list
is walked once per run; each part but the last takes the next devices of the walk until
`commit_every_devices` of them need their apps and event feed read (the scan's
`scope.FanOutScope`) or until `commit_every_minutes` will have passed since the part began by
the time its fan-outs have read what it handed out (steps sized by their pace: `take`), fetches
those, and is loaded and committed before the next part starts. The last
part, built once the walk has handed out every device, reads everything else (catalogues,
commands, operations, heartbeats, the census) and checks the device count. A part is never cut
short once built as the last one, since what it reads besides the devices would be read twice;
hence a full scan parted by time starts with a devices part whatever the fleet's size, and a small
fleet read within the time is two parts: its devices, then the rest. Only the last part moves
the devices watermark.

A run killed part-way leaves its committed parts in the warehouse. The next run is therefore a
full scan again; its fan-out scope skips the devices the warehouse already holds at their listed
version. It walks the device list again (one request per 1,000 devices) and fetches only what
was not committed: docs/decisions.md, "Resumable first loads" and "First loads commit by time".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..http import EsperClient
from ..http.pages import first_seen, iter_pages
from ..run.ledger import RunLedger
from ..run.state import EarlyStop
from ..tables.devices import DEVICES

# A part limited by time (`commit_every_minutes`) hands its devices out in steps, so that its end
# follows the clock whatever the API's pace. A step is what the fan-outs read in 1/STEP_SHARE of
# the part's time at the pace seen so far in the part (the part before's at first), cut to what
# they can read before the part is due, and at least TIME_STEP_DEVICES devices needing a fan-out
# (about 40 requests: 3 s at 12 requests/s). At most STEPS_IN_FLIGHT steps are unread by the
# fan-outs (one while their pace is unknown); the part ends once it is due, or once the steps
# unread would take the fan-outs until then at their pace. Their pace counts whole steps only:
# counted by the device, the second step went out beside the first one's slowest devices and,
# behind a bucket the client had not learnt yet, deepened its first overshoot (decisions.md,
# "The fan-outs' pace by the device, tried twice"). A fast API gets few big steps: every
# step costs dlt a page per table (measured: 2,000 devices in steps of 100 took 15 % longer
# in-process than in pages of 1,000).
TIME_STEP_DEVICES = 20
STEPS_IN_FLIGHT = 2
STEP_SHARE = 4
WAIT_S = 0.01  # between two looks at the fan-outs while the steps in flight are unread


@dataclass
class DeviceWalk:
    """The complete device list, read page by page (newest `updated_at` first), in parts.

    Args:
        client: the run's client.
        path: the device list route.
        limit: items per page.
        part_devices: devices needing a fan-out per part; None with no `part_seconds` reads the
            whole list as one part.
        part_seconds: a part but the last also ends once this long has passed since it began
            (`take`); None: parts end by their devices only.
    """

    client: EsperClient
    path: str
    limit: int
    part_devices: int | None = None
    part_seconds: float | None = None
    # sets aside a listed device without its id (`Table.require`); None: a walk read alone
    ledger: RunLedger | None = None
    seen: dict[str, Any] = field(default_factory=dict)  # id -> listed `updated_at`
    parts: int = 0  # parts handed out so far
    exhausted: bool = False
    newest: datetime | None = None  # the newest `updated_at` listed: the watermark once complete
    _keys: set[tuple[Any, ...]] = field(default_factory=set, repr=False)
    _stop: EarlyStop = field(
        default_factory=lambda: EarlyStop(DEVICES.cursor_field, None), repr=False
    )
    _pages: Iterator[list[dict]] | None = field(default=None, repr=False)
    _held: list[dict] = field(default_factory=list, repr=False)
    # the fan-outs that read each page this part hands out (set as the part is built)
    readers: tuple[str, ...] = ()
    _steps: list[int] = field(default_factory=list, repr=False)  # this part's pages: devices
    _read: dict[str, int] = field(default_factory=dict, repr=False)  # reader -> pages it read
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _pace: float | None = field(default=None, repr=False)  # devices read a second, last part

    @property
    def parted(self) -> bool:
        """Whether this scan is committed in several parts (by devices, by time, or both)."""
        return self.part_devices is not None or self.part_seconds is not None

    def has_more(self) -> bool:
        """Whether devices remain to be handed out (reads the next page if none is held)."""
        if not self._held and not self.exhausted:
            self._held = next(self._walk(), [])
            self.exhausted = not self._held
        return bool(self._held)

    def take(self, needs: Callable[[dict], bool]) -> Iterator[list[dict] | None]:
        """The next part, page by page: until `part_devices` devices for which `needs` is true,
        or until `part_seconds` have passed since it began.

        Every listed device is handed out once per run (a moving window can serve one twice);
        `needs` decides (and records) whether its apps and feed are read in this scan.

        A part limited by time hands its devices out in steps (`_step_size`) and keeps at most
        `STEPS_IN_FLIGHT` steps unread by its `readers` (the fan-outs), so that its time is spent
        reading them, not listing devices far ahead of them; meanwhile it yields None (dlt
        resolves the fan-outs' futures and asks again). Its clock is read before each step and
        while it waits: it ends once due, or once what is handed out and unread would keep the
        fan-outs busy until then (`_due`), so that it is committed about when it is due.
        """
        self.parts += 1
        self._steps, self._read = [], {}
        began = time.monotonic()
        try:
            yield from self._take(needs, began)
        finally:
            self._remember_pace(began)

    def _take(self, needs: Callable[[dict], bool], began: float) -> Iterator[list[dict] | None]:
        wanted = 0
        ends = None if self.part_seconds is None else began + self.part_seconds
        while self.part_devices is None or wanted < self.part_devices:
            size = None
            if ends is not None:
                while True:
                    if self._steps and self._due(began, ends):
                        return  # (after one step at least: every part moves the walk on)
                    if self._in_flight() < self._steps_ahead(began):
                        break
                    time.sleep(WAIT_S)  # not a spin: dlt comes straight back for the next item
                    yield None
                size = self._step_size(began, ends)
            if not self.has_more():
                return
            page, taken, step = self._held, 0, 0
            for item in page:
                taken += 1
                if needs(item):
                    wanted += 1
                    step += 1
                    if self.part_devices is not None and wanted >= self.part_devices:
                        break
                    if size is not None and step >= size:
                        break
            self._held = page[taken:]
            with self._lock:
                self._steps.append(step)
            yield page[:taken]

    def read_by(self, reader: str) -> None:
        """A fan-out (`readers`) has read one handed-out page of this part (any thread)."""
        with self._lock:
            self._read[reader] = self._read.get(reader, 0) + 1

    def _in_flight(self) -> int:
        """Pages of this part handed out and not yet read by every one of its `readers`."""
        with self._lock:
            return len(self._steps) - self._read_steps()

    def _read_steps(self) -> int:
        """Pages of this part every one of its `readers` has read (under the lock)."""
        return min((self._read.get(r, 0) for r in self.readers), default=len(self._steps))

    def _progress(self, began: float) -> tuple[float | None, int]:
        """The fan-outs' pace (devices a second) since the part `began` (before they have read a
        step of it: the part before's; None in the run's first), and the devices handed out in
        this part that they have not read yet."""
        with self._lock:
            done = self._read_steps()
            read, unread = sum(self._steps[:done]), sum(self._steps[done:])
        elapsed = time.monotonic() - began
        return (read / elapsed if read and elapsed > 0 else self._pace), unread

    def _steps_ahead(self, began: float) -> int:
        """Steps that may be unread at once: one until the fan-outs' pace is known (a step of an
        unknown pace may take long enough), then STEPS_IN_FLIGHT."""
        return STEPS_IN_FLIGHT if self._progress(began)[0] else 1

    def _due(self, began: float, ends: float) -> bool:
        """Whether the part ends now: its time is over, or the devices handed out and unread
        take the fan-outs until then at their pace (so the part is committed about when due)."""
        now = time.monotonic()
        pace, unread = self._progress(began)
        return now >= ends or (pace is not None and now + unread / pace >= ends)

    def _step_size(self, began: float, ends: float | None = None) -> int:
        """Devices of the next step: what the fan-outs read in 1/STEP_SHARE of the part's time at
        the pace seen since the part `began` (the part before's at first; TIME_STEP_DEVICES in
        the run's first), and no more than they can read before it `ends` after what they have
        not read yet; never fewer than TIME_STEP_DEVICES."""
        pace, unread = self._progress(began)
        if not pace or self.part_seconds is None:
            return TIME_STEP_DEVICES
        size = pace * self.part_seconds / STEP_SHARE
        if ends is not None:
            size = min(size, pace * (ends - time.monotonic()) - unread)
        return max(TIME_STEP_DEVICES, int(size))

    def _remember_pace(self, began: float) -> None:
        """The devices a part's fan-outs read per second, for the first step of the next part
        (each part otherwise began with a small step and waited for it: a 150,000-device first
        load in 150 parts paid that wait 150 times)."""
        with self._lock:
            read = sum(self._steps[: self._read_steps()])
        elapsed = time.monotonic() - began
        if read and elapsed > 0:
            self._pace = read / elapsed

    def again(self, needs: Callable[[dict], bool]) -> Iterator[list[dict]]:
        """The whole list read once more: the devices not handed out yet (a short first walk).

        A device that changes while the list is walked moves to the head of the list, behind the
        page cursor; a walk that counted fewer devices than the API reads the list again for them.
        """
        if self._pages is not None:
            self._pages.close()  # ends the first walk's read-ahead
        self._pages, self._held, self.exhausted = None, [], False
        self._stop = EarlyStop(DEVICES.cursor_field, None)
        part, self.part_devices, self.part_seconds = (
            (self.part_devices, self.part_seconds),
            None,
            None,
        )
        try:
            yield from self.take(needs)
        finally:
            self.part_devices, self.part_seconds = part

    def _walk(self) -> Iterator[list[dict]]:
        if self._pages is None:
            pages = iter_pages(
                self.client, self.path, limit=self.limit, paginator=DEVICES.paginator
            )
            self._pages = self._fresh(self.client.read_ahead(pages))
        return self._pages

    def _fresh(self, pages: Any) -> Iterator[list[dict]]:
        for _page, items in self._stop.pages(pages):
            self.newest = max(filter(None, (self.newest, self._stop.newest)), default=None)
            if self.ledger is not None:
                items = DEVICES.require(items, self.ledger)
            fresh = first_seen(items, self._keys, DEVICES.key)
            for item in fresh:
                self.seen[str(item.get("id"))] = item.get(DEVICES.cursor_field)
            if fresh:
                yield fresh


def planned_walk(ledger: RunLedger) -> DeviceWalk:
    """The run's walk of the device list: a full scan's, planned as it opened (`plan_full_scan`).

    The ledger names it by what the run asks of it (`run.ledger.Walk`); the scan's resources and
    the source use the whole `DeviceWalk`.
    """
    walk = ledger.plan.walk
    assert isinstance(walk, DeviceWalk), f"no full scan's walk in this run: {walk!r}"
    return walk
