"""The limit of requests in flight (`AdaptiveLimiter`): how many a client sends at once.

It starts at about 20 requests in flight (the API's guidance), doubles per window of healthy
answers until the first 429, then adds one slot per window and halves on a 429 that holds every
request (AIMD). How many are sent a second is `pacing.RatePacer`'s, which undoes the halvings
made by 429s that turn out not to be the pace's (`AdaptiveLimiter.restore`).
"""

from __future__ import annotations

import threading

from .errors import STOP_POLL_S


class AdaptiveLimiter:
    """Bounds requests in flight: slow start, then additive increase, halving on a 429 (AIMD).

    The API's guidance is to start at about 20 requests in flight and build up. Until the first
    429 the limit doubles after each window of healthy answers (a window = `limit` answers, about
    one round trip), so a run reaches the maximum within a few round trips instead of after
    hundreds of answers; after the first 429 it grows by one slot per window (classic AIMD), since
    the API has then shown where its limit lies.

    A burst of 429s from requests that were all in flight together halves the limit once, not
    once per answer: every slot remembers the "epoch" it was taken in, and only a 429 from the
    current epoch lowers the limit (and starts a new epoch).

    Urgent requests take the next free slot before bulk ones (`EsperClient.map(bulk=True)`): a
    background fan-out puts hundreds of independent requests in the queue, and the requests the
    rest of the run waits on (the next page of the device scan, the other lists) should not
    queue behind them. Each kind waits on its own condition, so a release wakes only waiters
    that can use the slot.
    """

    def __init__(self, initial: int, minimum: int, maximum: int) -> None:
        lock = threading.Lock()
        self._urgent = threading.Condition(lock)
        self._bulk = threading.Condition(lock)
        self.limit = initial
        self.minimum = minimum
        self.maximum = maximum
        self._in_flight = 0
        self._urgent_waiting = 0
        self._healthy = 0
        self._epoch = 0
        self._slow_start = True  # until the first 429

    def acquire(self, urgent: bool = True) -> int:
        """Wait for a free slot and take it. Returns the epoch to hand back to `release`."""
        with self._urgent:
            if urgent:
                self._urgent_waiting += 1
                while self._in_flight >= self.limit:
                    self._urgent.wait(STOP_POLL_S)  # timed: see `workers.wait_interruptibly`
                self._urgent_waiting -= 1
            else:
                while self._in_flight >= self.limit or self._urgent_waiting:
                    self._bulk.wait(STOP_POLL_S)
            self._in_flight += 1
            self._wake()  # slots may be left over for the other kind
            return self._epoch

    def state(self) -> tuple[int, bool]:
        """The limit and whether it still doubles (no 429 yet): what `restore` takes back."""
        with self._urgent:
            return self.limit, self._slow_start

    def restore(self, limit: int, slow_start: bool) -> None:
        """Undo the halvings since `state` was taken (`RatePacer`: their 429s were not the
        pace's): no lower than `limit`, growing as it grew then. A new epoch: the requests
        in flight were sent with those 429s, and theirs halve nothing."""
        with self._urgent:
            self.limit = max(self.limit, limit)
            self._slow_start = self._slow_start or slow_start
            self._epoch += 1
            self._wake()

    def release(self, epoch: int, outcome: str) -> None:
        """Give a slot back and adapt the limit.

        Args:
            epoch: What `acquire` returned for this slot.
            outcome: ``"healthy"`` (counts towards an increase), ``"throttled"`` (a 429) or
                ``"neutral"`` (anything else: errors neither raise nor lower the limit).
        """
        with self._urgent:
            self._in_flight -= 1
            if outcome == "throttled":
                if epoch == self._epoch:
                    self.limit = max(self.minimum, self.limit // 2)
                    self._epoch += 1
                    self._healthy = 0
                    self._slow_start = False
            elif outcome == "healthy":
                self._healthy += 1
                if self._healthy >= self.limit:
                    self._healthy = 0
                    grown = self.limit * 2 if self._slow_start else self.limit + 1
                    self.limit = min(self.maximum, grown)
            self._wake()

    def _wake(self) -> None:
        """Wake as many waiters as there are free slots, urgent ones first (lock held).

        Not `notify_all`: with hundreds of threads waiting (several fan-outs at once), waking
        all of them on every answer costs real CPU.
        """
        free = self.limit - self._in_flight
        if free > 0:
            (self._urgent if self._urgent_waiting else self._bulk).notify(free)
