"""Per-route request counters of the client, for the run summary and `_esper_runs`."""

from __future__ import annotations

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
