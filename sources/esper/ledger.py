"""What one run has seen: the API's time, the devices with activity, the counts of complete lists.

The resources write to it as they extract; the pipeline reads it after the load to reconcile what
reached the warehouse with the counts the API reported, and to write the run's bookkeeping rows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class Scan:
    """One table's complete scans in this run: the API's counts and the keys extracted."""

    expected: int = 0
    keys: set[tuple[Any, ...]] = field(default_factory=set)


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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_scan(
        self, table: str, expected: int, items: Iterable[Mapping[str, Any]], key: tuple[str, ...]
    ) -> None:
        """Record a complete list: the API's count for it and the keys of the items read."""
        keys = {tuple(item.get(k) for k in key) for item in items}
        with self._lock:
            scan = self.scans.setdefault(table, Scan())
            scan.expected += expected
            scan.keys |= keys

    def set_expected(self, table: str, expected: int) -> None:
        with self._lock:
            self.scans.setdefault(table, Scan()).expected = expected

    def mark_active(self, device_ids: list[str | None]) -> None:
        with self._lock:
            self.active_devices.update(d for d in device_ids if d)
