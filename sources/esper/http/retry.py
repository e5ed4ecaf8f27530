"""When a failed attempt is repeated, and how long a request waits: backoff, Retry-After, cooldown.

500/502/503/504, timeouts, dropped connections and 200 answers whose body is not JSON are retried
`max_retries` times with exponential backoff and full jitter. A 429 costs no retry (the wait
budget bounds it) and honours `Retry-After`: as a cooldown shared by every request of the client
when the 429 cut the pace (`pacing.py`: the API's bucket is empty), for that request alone when
it did not (the tenant's weather, the same overshoot again).
A request waits at most `max_wait` seconds between its attempts altogether: a longer
`Retry-After` fails it at once, quoting the server (docs/decisions.md, "Bounded requests").
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .answers import seconds_text
from .errors import EsperAPIError, EsperResponseError

log = logging.getLogger("esper_warehouse.client")

RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
# A 429 costs no retry (the wait budget bounds it); this many 429s in a row end a request anyway
# (a server answering 429 with `Retry-After: 0` would otherwise be asked for ever).
MAX_THROTTLED = 100


@dataclass
class Retry:
    """A failed attempt that may be repeated."""

    reason: str  # for logs and the final error: "HTTP 503", "timeout (ReadTimeout)", ...
    status: int | None
    wait: float | None = None  # a server-imposed wait (Retry-After); None: use backoff
    retry_after: str | None = None  # the Retry-After header as the server wrote it
    malformed: bool = False
    # A 429 that cut the pace (the API's bucket is empty): its Retry-After holds every request
    # of the client. Any other 429 (the tenant's weather, the same overshoot) holds only its own.
    holds_all: bool = True


@dataclass
class Value:
    """A successful attempt's parsed body."""

    value: Any


class RetryWaits:
    """The retry and wait policy of one client, shared by its threads.

    Args:
        max_retries: Retries per request after the first attempt (429s excepted).
        backoff_base: First backoff cap in seconds; the cap doubles per retry (full jitter).
        backoff_max: Largest backoff cap in seconds.
        max_wait: Seconds one request may wait between its attempts, in total.
        sleep: How to wait (the client's: ends at once when it is stopped).
        clock: Monotonic seconds.
        rng: Source of jitter.
    """

    def __init__(
        self,
        *,
        max_retries: int,
        backoff_base: float,
        backoff_max: float,
        max_wait: float,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_wait = max_wait
        self.sleep = sleep
        self.clock = clock
        self.rng = rng
        self._lock = threading.Lock()
        self._cooldown_until = 0.0  # monotonic time before which no request is sent

    def hold_until(self, until: float) -> None:
        """Hold every request of the client until `until` (monotonic): a Retry-After."""
        with self._lock:
            self._cooldown_until = max(self._cooldown_until, until)

    def wait_cooldown(self, budget: float) -> float:
        """Sleep until the shared Retry-After cooldown, at most `budget` s; the seconds slept."""
        with self._lock:
            remaining = self._cooldown_until - self.clock()
        wait = min(remaining, max(budget, 0.0))
        if wait <= 0:
            return 0.0
        self.sleep(wait)
        return wait

    def give_up(self, route: str, last: Retry, attempts: int) -> None:
        """Raise the typed error once the retries of a request are exhausted."""
        text = f"{route} failed after {attempts} attempts; last: {last.reason}"
        log.error("%s", text)
        if last.malformed:
            raise EsperResponseError(text, status=last.status, route=route)
        raise EsperAPIError(text, status=last.status, route=route)

    def wait_before_retry(
        self, route: str, failure: Retry, retry: int, budget: float, concurrency: int
    ) -> float:
        """Log the retry and wait: a shared cooldown for Retry-After, else jittered backoff.

        Args:
            budget: Seconds this request may still wait (what is left of `max_wait`).
            concurrency: The client's current limit, for the log line.

        Returns:
            The seconds waited here (a Retry-After wait happens in `wait_cooldown`: 0).

        Raises:
            EsperAPIError: The API asked (Retry-After) for a longer wait than `budget`.
        """
        if failure.wait is not None:
            self._hold_for_retry_after(route, failure, retry, budget, concurrency)
            if failure.holds_all:
                return 0.0  # wait_cooldown() sleeps before the next attempt
            self.sleep(failure.wait)
            return failure.wait
        cap = min(self.backoff_max, self.backoff_base * 2 ** (retry - 1))
        delay = min(self.rng.uniform(0, cap), max(budget, 0.0))
        (log.warning if failure.holds_all else log.debug)(
            "%s: %s; %s in %.2f s (concurrency %d)",
            route,
            failure.reason,
            self._attempt_text(failure, retry),
            delay,
            concurrency,
        )
        self.sleep(delay)
        return delay

    def _attempt_text(self, failure: Retry, retry: int) -> str:
        """`retry 2/8`, or for a 429 (which costs no retry) `429 number 12`."""
        return (
            f"429 number {retry}" if failure.status == 429 else f"retry {retry}/{self.max_retries}"
        )

    def _hold_for_retry_after(
        self, route: str, failure: Retry, retry: int, budget: float, concurrency: int
    ) -> None:
        assert failure.wait is not None
        asked = seconds_text(failure.wait)
        header = failure.retry_after or ""
        quoted = "Retry-After" if header == asked else f"Retry-After: {header}"
        if failure.wait > budget:
            text = (
                f"{route}: the API asked to wait {asked} s ({quoted}) before retrying, more "
                f"than the {seconds_text(max(budget, 0.0))} s left of the "
                f"{seconds_text(self.max_wait)} s a request may wait "
                "(max_retry_wait_s); the tenant is probably over its API quota: try again "
                "later"
            )
            log.error("%s", text)
            raise EsperAPIError(text, status=failure.status, route=route)
        # The server said when to come back: hold every request of this client until then,
        # unless the 429 was not this run's doing (then only this request waits).
        if failure.holds_all:
            self.hold_until(self.clock() + failure.wait)
        # A 429 that waits for itself alone (the tenant's weather) is routine: debug, not warning.
        (log.warning if failure.holds_all else log.debug)(
            "%s: %s; the API asked to wait %s s (%s): %s then (concurrency %d)",
            route,
            failure.reason,
            asked,
            quoted,
            self._attempt_text(failure, retry),
            concurrency,
        )
