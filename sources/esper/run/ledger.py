"""One run's context: what was decided as it opened, and what its steps hand each other.

Resources receive the whole `RunLedger` and use the parts of their concern. Each part says who
writes it and who reads it, and each hand-off is a named call on both sides: the device scan
tells the apps fan-out a device changed (`DeviceNews.changed`), the fan-out asks its route
(`DeviceNews.apps_route`). The pipeline reads the ledger after the load, to reconcile what
reached the warehouse with the counts the API reported (`Scans`) and to write the run's
bookkeeping rows (`Refusals.skipped`, `RunLedger.unreadable`).
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from ..arrow import Unreadable, unreadable_key
from ..times import NotATime, parse_time
from .refusals import Refusals
from .set_aside import SetAside

T = TypeVar("T")

TIME_KEYS = {"timestamp", "updated_at"}  # key fields the API sends as ISO text


class Walk(Protocol):
    """A full scan's walk of the device list, as the run and its readers see it: the scan's
    `DeviceWalk` (`scan/walk.py`), which this layer names only by what it is asked."""

    parts: int  # parts handed out so far
    seen: dict[str, Any]  # device id -> the `updated_at` listed

    @property
    def parted(self) -> bool: ...

    def has_more(self) -> bool: ...

    def read_by(self, reader: str) -> None: ...


class Scope(Protocol):
    """A full scan's per-device decision, as its readers see it: the scan's `FanOutScope`
    (`scan/scope.py`)."""

    @property
    def everything(self) -> bool: ...

    def in_rotation(self, device_id: str) -> bool: ...

    def needs(self, item: dict[str, Any]) -> bool: ...


@dataclass(frozen=True)
class RunPlan:
    """What this run is: decided as it opens, never changed by a resource.

    Written by `scan/opening.py` only: `open_run` makes it, `plan_full_scan` adds a full scan's
    fan-out scope and walk, and the source marks each part of a full scan it builds
    (`building_last`, `esper._resources`); each writes a new plan (`dataclasses.replace`) into
    `RunLedger.plan`. Read by the resources, and by the pipeline's runner (mode, API time,
    parts) and its reconciliation (the API time). The walk is the one object that moves: it hands
    out a full scan's devices part by part (`scan/walk.py`, under its own lock).
    """

    # the run's `EsperClient`, kept for the runner (its counters feed the run summary); this
    # layer sends no request, so it holds it as a plain object
    client: object | None = None
    as_of: datetime | None = None  # the API's time as the run opened; None: not opened yet
    full_scan: bool = False
    device_count: int | None = None  # the API's count as the run opened
    completed_full_scan: bool = False  # a full scan has completed before (else: a first load)
    resumed_from: datetime | None = None  # a resumed first load: the API time of its first part
    fan_out_scope: Scope | None = None  # a full scan's (None on incremental runs)
    walk: Walk | None = None  # a full scan's walk of the device list, shared by its parts
    building_last: bool = True  # whether the source built now is the run's last part
    # the tables a `--resources` selection reads (None: every table): a device table left out is
    # owed each device the run read (`scan/devices.py`)
    selected: frozenset[str] | None = None

    @property
    def opened(self) -> bool:
        return self.as_of is not None

    @property
    def in_parts(self) -> bool:
        """Whether this run is a full scan committed in parts (`scan/walk.py`)."""
        return self.walk is not None and self.walk.parted

    def reads(self, table: str) -> bool:
        """Whether this run reads `table` (every table unless a `--resources` selection)."""
        return self.selected is None or table in self.selected

    def last_part(self) -> bool:
        """Whether the source built now is the run's last (or only) part (may read a page)."""
        return self.walk is None or not self.walk.parted or not self.walk.has_more()

    def page_read(self, reader: str) -> None:
        """A full scan's fan-out `reader` has read one page of the walk (`DeviceWalk.read_by`)."""
        if self.walk is not None:
            self.walk.read_by(reader)


@dataclass
class DeviceNews:
    """What the device scan tells its fan-outs, and what the apps fan-out tells the pipeline.

    Written by `scan/devices.py`: `devices` names each device whose apps and feed this run
    reads (`changed`, with its apps route: a changed device on a nightly, a device in the scope
    of a full scan, a device asked again after a refusal); `device_apps` names each device whose
    complete app list came back empty or gone (`no_apps`). Read by `device_apps` (`apps_route`),
    by `tables/events.py` (`is_changed` per page of a full scan, `changed_ids` on the last
    resource) and, after the load, by `pipelines/run/reconcile.py` (`without_apps`: their apps are
    retired, as scd2 cannot retire without a row). One writer each, no lock: the scan is one
    thread, and the fan-outs' threads only add to a set.
    """

    _routes: dict[str, str | None] = field(default_factory=dict)  # id -> apps route
    _without_apps: set[str] = field(default_factory=set)

    def changed(self, device_id: str, apps_route: str | None) -> None:
        """The scan lists `device_id`, whose apps (at `apps_route`) and feed this run reads."""
        self._routes[device_id] = apps_route

    def apps_route(self, device_id: str) -> str | None:
        """Where a changed device's apps are listed (None: not changed, or no apps route)."""
        return self._routes.get(device_id)

    def is_changed(self, device_id: str) -> bool:
        return device_id in self._routes

    def changed_ids(self) -> set[str]:
        return set(self._routes)

    def no_apps(self, device_id: str) -> None:
        """A device's complete app list is empty, or the device is gone."""
        self._without_apps.add(device_id)

    def without_apps(self) -> list[str]:
        return sorted(self._without_apps)


@dataclass
class CommandNews:
    """What the request and operation lists tell the tables read per request and per operation.

    Written by `tables/commands.py`: `command_requests` names the requests new in this run
    (`requests_listed`), `operations` the operations that changed, with their state
    (`operations_listed`). Read by `command_statuses` (`new_requests`) and `operation_devices`
    (`changed_operations`), which come after them in the source's order (`esper._resources`).
    """

    _requests: set[str] = field(default_factory=set)
    _operations: dict[str, str | None] = field(default_factory=dict)  # id -> state

    def requests_listed(self, request_ids: Iterable[str]) -> None:
        self._requests.update(request_ids)

    def new_requests(self) -> set[str]:
        return set(self._requests)

    def operations_listed(self, states: Mapping[str, str | None]) -> None:
        """Operations read in this run (new or changed): id -> state."""
        self._operations.update(states)

    def changed_operations(self) -> dict[str, str | None]:
        return dict(self._operations)


@dataclass
class FeedNews:
    """Which devices' event feeds this run reads: the activity, and the feeds already read.

    Written by `tables/commands.py` (`active`: `command_statuses` and `operation_devices` name
    the devices whose status or operation row moved since the last run) and by both forms of
    `device_events` in `tables/events.py` (`reading`: the feeds read so far, by a full scan's
    device pages too). Read by `device_events`, the last resource of a run (`Table.after`):
    `active_devices`, and `unread` to leave out the feeds read already. Under a lock: the
    per-page feeds and the operation devices run in dlt's worker threads.
    """

    _active: set[str] = field(default_factory=set)
    _read: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def active(self, device_ids: Iterable[str | None]) -> None:
        with self._lock:
            self._active.update(d for d in device_ids if d)

    def active_devices(self) -> set[str]:
        with self._lock:
            return set(self._active)

    def reading(self, device_ids: Iterable[str]) -> None:
        """This run reads the feeds of `device_ids` (each feed is read once per run)."""
        with self._lock:
            self._read.update(device_ids)

    def unread(self, device_ids: Iterable[str]) -> list[str]:
        """`device_ids` whose feed this run has not read yet, in order."""
        with self._lock:
            return sorted(set(device_ids) - self._read)


def fingerprint(names: Sequence[str], values: Sequence[Any]) -> int:
    """A 64-bit fingerprint of a record's key, equal for the API's and the warehouse's forms.

    Times are compared as UTC instants (the API sends ISO text, the warehouse returns datetimes).
    Python's `hash` is stable within one process, which is all a run needs: the keys are read
    and checked in the same run. Two of ~4 million keys colliding has odds of about 1 in 10^6.
    """
    normal = []
    for name, value in zip(names, values, strict=True):
        if name in TIME_KEYS and value is not None:
            ts = parse_time(value)
            value = ts.astimezone(UTC) if ts else None
        normal.append(value)
    return hash(tuple(normal))


@dataclass
class Scan:
    """One table's complete scans in this run: the API's counts and the keys' fingerprints.

    Fingerprints, 8 bytes each, not the keys: a full scan of 100,000 devices reads ~4 million
    keys, which as Python tuples of strings took over half a gigabyte.
    """

    expected: int = 0
    keys: array = field(default_factory=lambda: array("q"))
    key: tuple[str, ...] = ()  # the columns fingerprinted: reconciliation reads the same ones


@dataclass
class Scans:
    """The complete lists this run read: the API's count of each and the keys read.

    Written by every resource that reads a list whole (`add`; the devices scan also `expect`s
    the API's count, and Data Tap adds the rows of an incremental query). Read by
    `pipelines/run/reconcile.py` after the load (`completed`, `has`), which checks each key is in
    the warehouse, once. Under a lock: the fan-outs add from dlt's worker threads.
    """

    _scans: dict[str, Scan] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self, table: str, expected: int, items: Iterable[Mapping[str, Any]], key: tuple[str, ...]
    ) -> None:
        """Record a complete list: the API's count for it and the keys of the items read."""
        try:
            keys = array("q", (fingerprint(key, [item.get(k) for k in key]) for item in items))
        except NotATime as error:  # a time in the key (heartbeats, device history)
            column = f"{table}.{'/'.join(k for k in key if k in TIME_KEYS)}"
            raise unreadable_key(column, error.value, "timestamp", error.reason) from None
        with self._lock:
            scan = self._scans.setdefault(table, Scan())
            scan.expected += expected
            scan.keys.extend(keys)
            scan.key = tuple(key)

    def expect(self, table: str, expected: int) -> None:
        """The API's count of `table`, in place of the counts its pages reported."""
        with self._lock:
            self._scans.setdefault(table, Scan()).expected = expected

    def has(self, table: str) -> bool:
        with self._lock:
            return table in self._scans

    def completed(self) -> Iterator[tuple[str, Scan]]:
        """Each completely read table and its scan, by name."""
        with self._lock:
            scans = sorted(self._scans.items())
        yield from scans


@dataclass
class SharedReads:
    """Lists read once per run for several tables or parts (users, roles, the legacy device
    list, the warehouse's event marks): name -> the result, or the error raised again.

    Written by whichever resource asks for a name first (`read_once`; the others wait for it).
    Read by the same callers through `read_once`: `tables/catalogues.py` (`shared_list`),
    `common.still_listed`, `scan/devices.py` (the legacy list's software fields),
    `tables/events.py` (the event marks) and `tables/pipelines.py` (the stage lists, the runs'
    children, the stages' plans). One lock per name: a read never waits for another
    name's.
    """

    _results: dict[str, tuple[object, BaseException | None]] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read_once(self, name: str, read: Callable[[], T]) -> T:
        """`read()` the first time `name` is asked for in this run, its result (or its error,
        raised again) every time after: a list several tables are built from is read once.
        """
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._results:
                try:
                    self._results[name] = (read(), None)
                except Exception as error:
                    self._results[name] = (None, error)
            value, error = self._results[name]
        if error is not None:
            raise error
        return cast(T, value)


@dataclass
class Listed:
    """The records this run read from their lists and loads as current (the parents of the
    per-parent reads among them), by table (not devices: `RunLedger.holds` reads the device scan
    for those).

    Written by `common.note_listed`, where a list is read (the whole lists and the lists read
    newest first), before any of its records' routes is asked for, from dlt's worker threads (a
    lock). Read by `RunLedger.holds`, for `common.refused_part`: a 404 on a listed parent's
    route is a refused part, kept and asked again, whatever its list read again says.
    """

    _ids: dict[str, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, table: str, record_ids: Iterable[object]) -> None:
        ids = {str(record_id) for record_id in record_ids}
        with self._lock:
            self._ids.setdefault(table, set()).update(ids)

    def holds(self, table: str, record_id: str) -> bool:
        with self._lock:
            return str(record_id) in self._ids.get(table, ())


@dataclass
class DataClock:
    """The newest time the data this run read carries (the newest heartbeat's `timestamp`, the
    newest `updated_at` of a nightly's device pages): what the API's `Date` is checked against
    before it becomes the run's "now". Written by those two reads (`tables/devices.py`,
    `scan/devices.py`). Read by the runner after the extract (`pipelines/run/clock.py`)."""

    newest: datetime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def saw(self, when: datetime | None) -> None:
        if when is None:
            return
        with self._lock:
            if self.newest is None or when > self.newest:
                self.newest = when


@dataclass
class RunLedger:
    """One run's context, in parts: its plan, the hand-offs between its resources, what it
    refused, the lists it read whole and the values it could not read.

    Made by the pipeline's runner (or by the source run alone, `esper._opened`) and given to
    every resource and every part of a full scan; each part says who writes and reads it.
    """

    plan: RunPlan = field(default_factory=RunPlan)
    devices: DeviceNews = field(default_factory=DeviceNews)
    commands: CommandNews = field(default_factory=CommandNews)
    feeds: FeedNews = field(default_factory=FeedNews)
    refusals: Refusals = field(default_factory=Refusals)
    scans: Scans = field(default_factory=Scans)
    shared: SharedReads = field(default_factory=SharedReads)
    unreadable: Unreadable = field(default_factory=Unreadable)  # values loaded as NULL, counted
    listed: Listed = field(default_factory=Listed)  # parents this run read from their lists
    data_clock: DataClock = field(default_factory=DataClock)  # the data's own clock
    # records served without their key, cursor or parent key: never loaded, kept for the admin
    rejected: SetAside = field(default_factory=SetAside)

    def set_aside(
        self, table: str, column: str, route: str | None, items: list[Any], *, kept: bool
    ) -> None:
        """Set aside `items` of `table`, served from `route` without `column`: kept for
        `_esper_rejected`, and named with the count in the run (partial); `kept`: the table is
        kept whole as loaded (a whole list lacking a record is never loaded in its place)."""
        if not items:
            return
        count = self.rejected.add(table, column, route, items)
        self.refusals.set_aside(table, column, route, count, kept=kept)

    def keep(self, table: str, text: str) -> None:
        """`table` is kept whole as loaded in this run, for the reason `text` (`Refusals.keep`)."""
        self.refusals.keep(table, text)

    def has_set_aside(self, table: str) -> bool:
        """Whether this run set aside a record of `table` or of a table it is read from."""
        return any(
            name == table or table in self.refusals.dependents.get(name, ())
            for name in self.rejected.tables()
        )

    def holds(self, table: str, record_id: str) -> bool:
        """Whether this run read `record_id` as a current record of `table`: for devices, listed
        by this run's device scan (the full scan's walk, a nightly's changed devices) or read
        again by id; for another table, named by its list this run (`Listed`). A 404 on one of its
        routes then cannot prove it gone, whatever a list read after it says
        (`common.refused_part`): the run loads the record as current, so its children are kept
        and asked again, not retired under it.
        """
        if table != "devices":
            return self.listed.holds(table, record_id)
        walk = self.plan.walk
        return self.devices.is_changed(record_id) or (walk is not None and record_id in walk.seen)
