"""What one run has seen: the API's time, the devices with activity, the counts of complete lists.

The resources write to it as they extract; the pipeline reads it after the load to reconcile what
reached the warehouse with the counts the API reported, and to write the run's bookkeeping rows.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..arrow import Unreadable, unreadable_key
from ..times import NotATime, parse_time

log = logging.getLogger(__name__)

T = TypeVar("T")

TIME_KEYS = {"timestamp", "updated_at"}  # key fields the API sends as ISO text


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
class RunLedger:
    """Shared, thread-safe notes of one extraction run."""

    as_of: datetime | None = None
    full_scan: bool = False
    client: Any = None  # the run's EsperClient (its counters feed the run summary)
    changed_devices: dict[str, str | None] = field(default_factory=dict)  # id -> apps route
    active_devices: set[str] = field(default_factory=set)
    devices_without_apps: set[str] = field(default_factory=set)  # complete app list was empty
    scans: dict[str, Scan] = field(default_factory=dict)
    new_requests: set[str] = field(default_factory=set)  # command requests new in this run
    changed_operations: dict[str, str] = field(default_factory=dict)  # id -> state
    application_ids: set[str] = field(default_factory=set)
    fan_out_scope: Any = None  # a full scan's `weekly.FanOutScope` (None on incremental runs)
    device_count: int | None = None  # the API's count when the run opened
    completed_full_scan: bool = False  # a full scan has completed before (else: a first load)
    walk: Any = None  # a full scan's `walk.DeviceWalk`, shared by its parts
    resumed_from: datetime | None = None  # a resumed first load: the API time of its first part
    building_last: bool = True  # whether the source built now is the run's last part
    android_software: dict[str, dict[str, Any]] | None = None  # read once per run
    feeds_read: set[str] = field(default_factory=set)  # devices whose feed this run has read
    event_marks: dict[str, Any] | None = None  # `watermarks.event_marks`, read once per run
    event_marks_read: bool = False
    unavailable: dict[str, str] = field(default_factory=dict)  # table -> why it was skipped
    unreadable: Unreadable = field(default_factory=Unreadable)  # values loaded as NULL, counted
    # lists read once per run for several tables (users, roles): name -> result or error
    shared_reads: dict[str, Any] = field(default_factory=dict)
    # (table, route, status, meaning, noun) -> parts of the table the API refused (per device,
    # per blueprint, per role, ...): each counted, none silent
    part_skips: dict[tuple[str, str, int, str, str], int] = field(default_factory=dict)
    # table -> what a refused route left out of it although the table loaded ("devices":
    # the Android patch levels of the legacy device list)
    left_out: dict[str, str] = field(default_factory=dict)
    # the parts to ask again on the next run, {table: {parent id: note}}: the run's writable
    # `state.REFUSED_PARTS` dict (a resource binds it: `bind_retries`), None until bound
    retries: dict[str, dict[str, Any]] | None = None
    # table -> the tables read from it (`tables.DEPENDENTS`): skipped with it
    dependents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _read_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read_once(self, name: str, read: Callable[[], T]) -> T:
        """`read()` the first time `name` is asked for in this run, its result (or its error,
        raised again) every time after: a list several tables are built from is read once.

        The tables' resources may ask in any order; the first one reads, the others wait.
        """
        with self._read_lock:
            if name not in self.shared_reads:
                try:
                    self.shared_reads[name] = (read(), None)
                except Exception as error:
                    self.shared_reads[name] = (None, error)
            value, error = self.shared_reads[name]
        if error is not None:
            raise error
        return value  # type: ignore[no-any-return]

    def skip_part(
        self,
        table: str,
        part: str,
        error: Any,
        meaning: str,
        *,
        noun: str = "device",
        retry: Any = True,
    ) -> None:
        """Count one part of `table` whose route the API refused (logged once per route).

        Args:
            part: the parent's id (a device, a blueprint, a role).
            error: the refusal (its `route` and `status` are named).
            retry: what the next run needs to ask the part again (kept in `retries`), or None
                when the table itself asks again (a replaced table, a head not moved).
        """
        key = (table, error.route, error.status, meaning, noun)
        with self._lock:
            first = key not in self.part_skips
            self.part_skips[key] = self.part_skips.get(key, 0) + 1
            if retry is not None and self.retries is not None:
                self.retries.setdefault(table, {})[part] = retry
        if first:
            log.warning(
                "%s: skipping %ss whose %s answers %d (%s); counted in the run summary",
                table,
                noun,
                error.route,
                error.status,
                meaning,
            )

    def part_done(self, table: str, part: str) -> None:
        """One part of `table` answered (or its parent is gone): not asked again for a refusal."""
        with self._lock:
            if self.retries is not None and part in self.retries.get(table, {}):
                del self.retries[table][part]
                if not self.retries[table]:
                    del self.retries[table]

    def to_retry(self, table: str) -> dict[str, Any]:
        """The parts of `table` an earlier run was refused and this run asks again."""
        with self._lock:
            return dict((self.retries or {}).get(table, {}))

    def leave_out(self, table: str, text: str) -> None:
        """Record (and log once) what a refused route left out of a table that still loads."""
        self._note_once(self.left_out, table, text, "%s: loaded without %s")

    def skipped(self) -> dict[str, str]:
        """Why each table was skipped, whole or in part, e.g. for `_esper_runs`."""
        with self._lock:
            out = dict(self.unavailable)
            for table, text in self.left_out.items():
                text = f"loaded without {text}"
                out[table] = f"{out[table]}; {text}" if table in out else text
            for (table, route, status, meaning, noun), count in sorted(self.part_skips.items()):
                text = f"{count} {noun}(s) skipped: {route} answered {status} ({meaning})"
                out[table] = f"{out[table]}; {text}" if table in out else text
        return out

    def mark_skipped(self, table: str, text: str) -> None:
        """Record (and log once) that `table` is skipped in this run, for the reason `text`."""
        self._note_once(
            self.unavailable, table, text, "%s: not loaded in this run (unavailable), %s"
        )

    def _note_once(self, notes: dict[str, str], table: str, text: str, line: str) -> None:
        """`notes[table] = text` and one warning `line % (table, text)`, the first time only."""
        with self._lock:
            if table in notes:
                return
            notes[table] = text
        log.warning(line, table, text)

    def mark_unavailable(self, table: str, error: Any) -> None:
        """Record (and log once) that `table` is skipped in this run, with the route and status."""
        if error.route and error.status:
            text = f"skipped: {error.route} answered {error.status} ({error.reason})"
        else:  # not an answer of a route (a Data Tap job that failed, a spent request budget)
            text = f"skipped: {error.reason}"
        self.mark_skipped(table, text)

    def add_scan(
        self, table: str, expected: int, items: Iterable[Mapping[str, Any]], key: tuple[str, ...]
    ) -> None:
        """Record a complete list: the API's count for it and the keys of the items read."""
        try:
            keys = array("q", (fingerprint(key, [item.get(k) for k in key]) for item in items))
        except NotATime as error:  # a time in the key (heartbeats, device history)
            column = f"{table}.{'/'.join(k for k in key if k in TIME_KEYS)}"
            raise unreadable_key(column, error.value, "timestamp", error.reason) from None
        with self._lock:
            scan = self.scans.setdefault(table, Scan())
            scan.expected += expected
            scan.keys.extend(keys)
            scan.key = tuple(key)

    def set_expected(self, table: str, expected: int) -> None:
        with self._lock:
            self.scans.setdefault(table, Scan()).expected = expected

    @property
    def in_parts(self) -> bool:
        """Whether this run is a full scan committed in parts (`walk.py`)."""
        return self.walk is not None and self.walk.parted

    def page_read(self, reader: str) -> None:
        """A full scan's fan-out `reader` has read one page of the walk (`DeviceWalk.read_by`)."""
        if self.walk is not None:
            self.walk.read_by(reader)

    def last_part(self) -> bool:
        """Whether the source built now is the run's last (or only) part (may read a page)."""
        return not self.in_parts or not self.walk.has_more()

    def mark_active(self, device_ids: list[str | None]) -> None:
        with self._lock:
            self.active_devices.update(d for d in device_ids if d)
