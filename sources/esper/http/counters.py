"""What one client counted: per route template, its attempts, retries, 429s, errors, bytes and
seconds (`RouteStats`), and when the API was answering (`Counters`), for the run's summary and its
record (`EsperClient.stats`, `EsperClient.totals`, `EsperClient.pacing`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, fields


@dataclass
class RouteStats:
    """Counters for one route template (or, from `EsperClient.totals`, for all of them).

    Attributes:
        requests: Attempts sent, retries included.
        retries: Attempts that were repeated after a failure or a 429.
        throttled: 429 answers.
        errors: Attempts that failed for any other reason (5xx, other 4xx, timeout, dropped
            connection, body not JSON).
        bytes: Bytes received on the wire (compressed size when gzip was used).
        seconds: Time spent in attempts (waits between retries not included).
    """

    requests: int = 0
    retries: int = 0
    throttled: int = 0
    errors: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add(self, other: RouteStats) -> None:
        """Add the counters of `other` to these."""
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class Counters:
    """What one client counted, per route, and when the API was answering (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routes: dict[str, RouteStats] = {}
        self._first_sent = 0.0  # monotonic time of the first answered request's attempt
        self._last_answer = 0.0  # ... and of the last answer

    def count(self, route: str, **increments: float) -> None:
        """Add `increments` (RouteStats field names) to the route's counters."""
        with self._lock:
            stats = self._routes.setdefault(route, RouteStats())
            for name, value in increments.items():
                setattr(stats, name, getattr(stats, name) + value)

    def answered(self, sent: float) -> None:
        """An answer came for an attempt sent at `sent` (monotonic)."""
        with self._lock:
            self._first_sent = self._first_sent or sent
            self._last_answer = time.monotonic()

    def routes(self) -> dict[str, RouteStats]:
        """Copies of the counters, keyed by route template."""
        with self._lock:
            return {route: RouteStats(**vars(s)) for route, s in sorted(self._routes.items())}

    def totals(self) -> RouteStats:
        """The counters of all routes added up."""
        total = RouteStats()
        for route_stats in self.routes().values():
            total.add(route_stats)
        return total

    def answering_s(self) -> float:
        """Seconds from the first answered request sent to the last answer (0: none yet)."""
        with self._lock:
            return self._last_answer - self._first_sent if self._first_sent else 0.0
