"""The client's request pacer: learn the tenant's rate from its 429s instead of probing it.

A tenant's API sits behind a rate limit (a token bucket: so many requests per second, answered
429 beyond it) that it shares with the admin's console and other tools. Bounding requests *in
flight* (the client's concurrency limiter) does not bound requests *per second*: with short
round trips even a few requests in flight exceed the bucket, and every worker keeps knocking
(a 600-device load saw 68 % of its requests refused). So every request also passes this pacer:

* Until the first 429 it does not pace at all: a tenant without a tight limit is read at full
  speed.
* On a 429 (with or without `Retry-After`) it sets the pace for *every* worker to a little below
  the rate the API was accepting (`CUT` x the requests sent and not refused over the last
  `WINDOW_S` seconds),
  (and below the pace that was refused), and remembers that rate as the ceiling; with nothing
  answered lately it halves the pace (a 429 before any answer leaves the wait to the retry's
  backoff or `Retry-After`). 429s for requests paced before the last cut are the same overshoot
  and cut nothing; one for a request paced after it cuts again.
* Between 429s the pace grows back: quickly (`FAST_GROWTH` per second) up to `NEAR` x the
  ceiling, then slowly (`SLOW_GROWTH` per second) past it, so it finds a raised limit again
  and spends a long time near the allowed rate for each overshoot.
* Requests are spaced evenly (`1 / rate` apart), never sent as a burst after a wait.

Measured behind a token bucket (bench/README.md "Polite client"): at most a few percent of the
requests refused, most of the allowed rate used.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 2.0  # answers counted to estimate the rate the API allows
MIN_SPAN_S = 1.0  # ... over at least this span
CUT = 0.9  # after a 429: this share of the answered rate
NEAR = 0.95  # grow fast up to this share of the last ceiling, then slowly
FAST_GROWTH = 0.05  # per second, relative
SLOW_GROWTH = 0.005  # per second, relative
MIN_RATE = 0.5  # requests per second: the pace never drops below this


class RatePacer:
    """Spaces requests at a rate learnt from 429s (thread-safe).

    Args:
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.rate: float | None = None  # requests per second; None: not paced (no 429 yet)
        self.ceiling: float | None = None  # the answered rate when the last 429 came
        self._next = 0.0  # the earliest time the next request may be sent
        self._sent: deque[float] = deque()  # send times in the last window
        self._refused: deque[float] = deque()  # times of 429 answers in the last window
        self._last_cut = float("-inf")
        self._grown_at = 0.0

    def reserve(self) -> float:
        """Take the next send slot; returns how many seconds to wait before sending."""
        with self._lock:
            now = self._clock()
            at = now
            if self.rate is not None:
                self._grow(now)
                at = max(now, self._next)
                self._next = at + 1.0 / self.rate
            self._sent.append(at)
            return at - now

    def answered(self, throttled: bool, reserved_at: float | None = None) -> None:
        """Record an answer: a 429 (`throttled`) cuts the pace.

        Args:
            throttled: the answer was a 429.
            reserved_at: when the request took its slot (`reserve`, the pacer's clock); a 429
                for a request paced before the last cut is the same overshoot, not news.
        """
        with self._lock:
            if not throttled:
                return
            now = self._clock()
            for times in (self._sent, self._refused):
                while times and times[0] < now - WINDOW_S:
                    times.popleft()
            self._refused.append(now)
            if (reserved_at if reserved_at is not None else now) <= self._last_cut:
                return  # paced before the last cut: that cut already answered it
            # (slots reserved for later are not sent yet)
            accepted = sum(1 for t in self._sent if t <= now) - len(self._refused)
            if accepted > 0:
                # Requests sent and not refused: a 429 comes back before the answers of the
                # requests sent with it, so counting answers would understate the rate. Over at
                # least MIN_SPAN_S: the first requests of a run use the bucket's saved tokens.
                observed = accepted / max(MIN_SPAN_S, now - self._sent[0])
                self.ceiling = observed
                paced = CUT * self.rate if self.rate is not None else float("inf")
                self.rate = max(MIN_RATE, min(CUT * observed, paced))
            elif self.rate is not None:  # nothing answered lately: halve the pace
                self.rate = max(MIN_RATE, self.rate / 2)
            else:  # nothing to learn from yet: the retry's own wait (backoff, Retry-After) rules
                return
            self._last_cut = self._grown_at = now
            # the next request waits one interval: the bucket the 429 came from is empty
            self._next = max(self._next, now + 1.0 / self.rate)

    def _grow(self, now: float) -> None:
        """Raise the pace for the time since the last growth (lock held)."""
        elapsed = now - self._grown_at
        if elapsed <= 0 or self.rate is None:
            return
        self._grown_at = now
        near = NEAR * (self.ceiling or self.rate)
        growth = FAST_GROWTH if self.rate < near else SLOW_GROWTH
        grown = self.rate * (1 + growth) ** elapsed
        if self.rate < near < grown:
            grown = near
        self.rate = grown
