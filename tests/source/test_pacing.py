"""The pacer learns a tenant's rate from its 429s (sources/esper/http/pacing.py).

The first tests drive the pacer with a fake clock. The last one runs it against a token bucket in
simulated time (workers, round trips, the client's shared Retry-After cooldown and backoff), the
behaviour bench/README.md "Polite client" measures over real HTTP.
"""

from __future__ import annotations

import heapq
import itertools
import random

import pytest
from esper_warehouse.sources.esper.http.pacing import MIN_RATE, RatePacer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _traffic(pacer: RatePacer, clock: Clock, per_second: int = 20, seconds: int = 2) -> None:
    """Requests sent and answered at `per_second` for `seconds`, none refused."""
    for _ in range(per_second * seconds):
        clock.now += 1 / per_second
        assert pacer.reserve() == 0.0
        pacer.answered(throttled=False)


def test_no_pace_before_the_first_429() -> None:
    clock = Clock()
    pacer = RatePacer(clock)
    for _ in range(1000):
        assert pacer.reserve() == 0.0
        pacer.answered(throttled=False)
    assert pacer.rate is None


def test_a_429_paces_every_request_below_the_rate_the_api_answered() -> None:
    clock = Clock()
    pacer = RatePacer(clock)
    _traffic(pacer, clock)
    pacer.answered(throttled=True)
    assert pacer.rate == pytest.approx(0.9 * 20, rel=0.05)
    waits = [pacer.reserve() for _ in range(10)]  # ten workers asking at the same instant
    gaps = [b - a for a, b in itertools.pairwise(waits)]
    assert waits[0] > 0, "the bucket that refused is empty: even the first one waits"
    assert all(g == pytest.approx(1 / pacer.rate, rel=0.01) for g in gaps), "spaced, no burst"


def test_a_burst_of_429s_cuts_once_and_a_storm_never_stops_the_pace() -> None:
    clock = Clock()
    pacer = RatePacer(clock)
    _traffic(pacer, clock)
    for _ in range(20):  # the requests already under way come back refused
        pacer.answered(throttled=True)
    assert pacer.rate == pytest.approx(18, rel=0.05)
    for _ in range(50):  # nothing but 429s for 100 s: halved every window, never below MIN_RATE
        clock.now += 2.0
        pacer.answered(throttled=True)
    assert pacer.rate == MIN_RATE
    assert 0 < pacer.reserve() <= 1 / MIN_RATE + 1e-9, "still sending, never a tight loop"


def test_the_pace_grows_back_fast_to_near_the_ceiling_then_slowly() -> None:
    clock = Clock()
    pacer = RatePacer(clock)
    _traffic(pacer, clock)
    pacer.answered(throttled=True)
    ceiling = pacer.ceiling
    clock.now += 2
    pacer.reserve()
    assert pacer.rate < 0.95 * ceiling + 1e-9
    clock.now += 10
    pacer.reserve()
    assert 0.95 * ceiling <= pacer.rate < ceiling, "near the ceiling after a few seconds"
    clock.now += 600
    pacer.reserve()
    assert pacer.rate > 1.5 * ceiling, "a raised limit is found again"


def _behind_a_token_bucket(rate: float, retry_after: bool, seconds: float = 120) -> dict:
    """Workers sending through the pacer to a token bucket (capacity: one second of tokens), in
    simulated time: 20 workers, 50 ms round trips, the client's shared Retry-After cooldown or
    its jittered backoff after a 429. Returns the answered rate (share of `rate`) and the share
    of requests refused."""
    clock = Clock()
    pacer = RatePacer(clock)
    rng = random.Random(7)
    tokens, filled_at, cooldown = float(rate), 0.0, 0.0
    sent = refused = answered = 0
    # (time, order, kind, worker, 429s in a row, paced at); kinds: begin, send, answer, refusal
    events: list[tuple[float, int, str, int, int, float]] = []
    order = iter(range(10**9))

    def at(time: float, kind: str, worker: int, strikes: int, sent_at: float = 0.0) -> None:
        heapq.heappush(events, (time, next(order), kind, worker, strikes, sent_at))

    for worker in range(20):
        at(0.0, "begin", worker, 0)
    while events:
        now, _, kind, worker, strikes, sent_at = heapq.heappop(events)
        if now > seconds:
            break
        clock.now = now
        if kind == "begin":
            if cooldown > now:  # the client's shared Retry-After wait comes first
                at(cooldown, "begin", worker, strikes)
            else:
                at(now + pacer.reserve(), "send", worker, strikes, now)
        elif kind == "send":
            sent += 1
            tokens = min(float(rate), tokens + (now - filled_at) * rate)
            filled_at = now
            if tokens >= 1:
                tokens -= 1
                at(now + 0.05, "answer", worker, 0, sent_at)
            else:
                at(now + 0.05, "refusal", worker, strikes + 1, sent_at)
        elif kind == "answer":
            answered += 1
            pacer.answered(throttled=False, reserved_at=sent_at)
            at(now, "begin", worker, 0)
        else:
            refused += 1
            pacer.answered(throttled=True, reserved_at=sent_at)
            if retry_after:
                cooldown = max(cooldown, now + 1.0)
                at(now, "begin", worker, strikes)
            else:
                at(now + rng.uniform(0, min(60.0, 0.5 * 2 ** (strikes - 1))), "begin", worker,
                   strikes)  # fmt: skip
    return {"share_of_rate": answered / seconds / rate, "refused": refused / sent}


@pytest.mark.parametrize("rate", [10, 20, 50])
@pytest.mark.parametrize("retry_after", [True, False], ids=["retry-after", "no-retry-after"])
def test_behind_a_token_bucket_few_refusals_and_most_of_the_rate(rate, retry_after) -> None:
    got = _behind_a_token_bucket(rate, retry_after)
    assert got["refused"] <= 0.05, got
    assert got["share_of_rate"] >= 0.85, got
