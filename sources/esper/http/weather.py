"""The pacer's weather judgement: its evidence and the rules it judges by (`pacing.RatePacer`
asks; not thread-safe, the pacer's lock is held).

Refusals this run's pace caused (a token bucket it overshoots, a shedder above some rate)
change when the pace changes; the tenant's "weather" (other clients spending the same budget,
an API refusing a request once) does not. The evidence that tells them apart:

* `Trial`: the answers to requests paced after a cut (did the refused share drop?);
* `FirstRefusals`: the pace that first drew refusals, a trial below it, and the run's slow
  first requests (one at a time: a trial below any pace a cut would try);
* `RetriedAnswers`: first attempts and retries of refused requests, paced alike (a refusal
  that follows the request, not the pace).

The tuned numbers are grouped by what they tune: `TRIAL`, `WEATHER`, `RETRY`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class TrialTuning:
    """How long a cut is on trial, and the trial below the pace that first drew refusals."""

    answers: int = 30  # answers to requests paced after a cut that tell whether it helped
    refusals: int = 8  # ... fewer, when this many of them and most (60 %) were refused
    deep_rate: float = 8.0  # a trial below the first refusals is never slower than this ...
    deep_answers: int = 40  # ... and, when nothing is refused, ends after this many answers
    slow_answers: int = 5  # answers to requests sent below deep_rate that stand for such a trial
    # One refused is tried at half its pace at the next re-test, down to this pace (a shedder
    # refusing a share above 3 a second is found at 2/s).
    deepest_rate: float = 2.0


@dataclass(frozen=True)
class WeatherTuning:
    """What a refused share is judged over, and when it is weather."""

    share_answers: int = 100  # the latest answers the refused share is judged over
    residue: float = 0.02  # refusals above the weather left after a cut: cut again to see whose
    margin: float = 0.05  # refusals within weather + this (or 3 standard errors) are weather
    max_share: float = 0.5  # a refused share above this is not weather
    retest_s: float = 30.0  # in weather, a 429 this long after the last cut cuts anyway


@dataclass(frozen=True)
class RetryTuning:
    """Refusals of the request, not of the pace: a retry is sent at the pace of a first attempt."""

    known: int = 5  # answers to retries of refused requests before they are compared ...
    chance: float = 1e-3  # ... and how seldom a pace-bound refusal would spare them as often


TRIAL = TrialTuning()
WEATHER = WeatherTuning()
RETRY = RetryTuning()


def noise(share: float, answers: int) -> float:
    """The standard error of a refused share measured over `answers` answers."""
    return math.sqrt(share * (1 - share) / answers)


def spared(refused: int, firsts: int, again: int, retries: int) -> bool:
    """Whether `retries` (at least `RETRY.known`), `again` of them refused, were refused at
    most a quarter as often as the `firsts` first attempts paced alike (`refused` of them),
    and seldom enough that retries refused as often as those (their share less two standard
    errors) would be so seldom one time in `1 / RETRY.chance`: the refusals follow the
    request, not the pace."""
    if retries < RETRY.known or not firsts:
        return False
    share = refused / firsts
    if again > retries * share / 4:
        return False
    hedged = (refused + 1) / (firsts + 2)  # a share of few answers is never sure
    low = max(0.0, share - 2 * noise(hedged, firsts))
    chance = sum(
        math.comb(retries, k) * low**k * (1 - low) ** (retries - k) for k in range(again + 1)
    )
    return chance < RETRY.chance


@dataclass
class Trial:
    """A cut under test: the share it was cut at, and the answers since."""

    at: float  # when the cut was made (the pacer's clock)
    share_before: float  # refused share of the latest answers when the cut was made
    judged: bool = True  # False for the first cut of a run (from no pace at all)
    answers: int = 0  # answers to requests paced after the cut
    refused: int = 0
    retries: int = 0  # ... of them, retries of refused requests (paced as first attempts are)
    retries_refused: int = 0
    last_refused: bool = False  # the latest answer counted was a 429
    # A trial below the first refusals counts the answers that come from this time on (a
    # second after its cut: a bucket or a shedder counts the second before), to requests
    # paced after its cut: those queued for a slot then are sent at its pace, up to
    # (requests in flight / pace) seconds later, and count once answered. None: `at`.
    counts_from: float | None = None

    @property
    def deep(self) -> bool:
        """A trial below the pace that first drew refusals."""
        return self.counts_from is not None

    def counts(self, paced_at: float, now: float) -> bool:
        """Whether the answer, now, to a request paced at `paced_at` is the trial's."""
        return paced_at > self.at and (self.counts_from is None or now > self.counts_from)

    def count(self, throttled: bool, retried: bool) -> None:
        """Count an answer to a request paced after the cut."""
        self.answers += 1
        self.refused += throttled
        self.last_refused = throttled
        self.retries += retried
        self.retries_refused += throttled and retried

    def done(self) -> bool:
        """Enough answers to judge the cut. A trial where most answers are refused, a retry
        among them, is over early (that is never weather): refused first attempts alone may be
        new requests the API refuses once, while their retries wait their `Retry-After`. A
        trial below the first refusals ends at its first refusal."""
        if self.deep:
            return self.refused >= 1 or self.answers >= TRIAL.deep_answers
        overshot = self.refused >= TRIAL.refusals and self.refused > 0.6 * self.answers
        return (overshot and self.retries_refused > 0) or self.answers >= TRIAL.answers

    def spared(self) -> bool:
        """Whether the trial's retries were `spared` against its first attempts: paced alike,
        after the cut, so the refusals follow the request, not the pace."""
        firsts = self.answers - self.retries
        refused = self.refused - self.retries_refused
        return spared(refused, firsts, self.retries_refused, self.retries)

    def share_with_the_last(self) -> float:
        """The refused share over this trial and the one before it (the share it was cut at):
        when both saw the same share, the weather is measured on both."""
        refused = self.share_before * TRIAL.answers + self.refused
        return refused / (TRIAL.answers + self.answers)


class FirstRefusals:
    """The pace that first drew refusals, the answers to the run's slow first requests, and
    whether a trial below it saw the share (not thread-safe: the pacer's lock is held).

    That pace is the answers accepted in the second before the run's first 429 (a count per
    second, as a bucket or a shedder counts). The trial below it runs at a quarter of it (a
    bucket first refuses after its second of saved tokens and a second of its rate; a shedder
    after a few refusals above its N), never slower than `TRIAL.deep_rate`: under weather the first
    429 comes after a handful of answers, by chance, and a trial's answers take
    `TRIAL.deep_answers / pace` seconds.
    """

    def __init__(self) -> None:
        self.accepted: int | None = None  # answers accepted in the second before the first 429
        self._oks: deque[float] = deque()  # times of accepted answers until then
        # The pace of the slowest trial below it that was refused (None: none yet): the next
        # one (the weather's next re-test) is tried at half that pace.
        self.refused_at: float | None = None
        self._refused_when = -math.inf  # ... and when it was cut to (the pacer's clock)
        # Until the first cut: answers to requests sent while this run sent fewer than
        # TRIAL.deep_rate a second (its first requests, one at a time), and how many were refused.
        self.slow_answers = 0
        self.slow_refused = 0

    def note_pace(self, others: int, throttled: bool) -> None:
        """Count an answer to a request sent with `others` sent in the second before it and
        until its answer, until the first cut: one sent slower than a trial below the first
        refusals would pace is that trial's evidence."""
        if others < TRIAL.deep_rate:
            self.slow_answers += 1
            self.slow_refused += throttled

    def slow_share_holds(self, share: float, answers: int) -> float | None:
        """The weather, when the refused share of the latest `answers` (`share`) is what the
        requests sent slowly saw (within two standard errors of the difference), or None.

        Refusals at a pace no trial would go below (one request at a time) are not this run's
        overshoot; when the fast requests are refused about as often, the share does not
        depend on the pace: no cut would change it. The weather is the lower of the two
        shares: the slow sample is small, and the fast share may hold some overshoot.
        """
        slow, fast = self.slow_answers, answers
        if self.slow_refused == 0 or slow < TRIAL.slow_answers or share >= WEATHER.max_share:
            return None
        slow_share = self.slow_refused / slow
        pooled = (self.slow_refused + share * fast) / (slow + fast)
        spread = math.sqrt(pooled * (1 - pooled) * (1 / slow + 1 / fast))
        if share - slow_share > 2 * spread:
            return None
        return min(slow_share, share)

    def note(self, now: float, throttled: bool) -> None:
        """Count an answer, until the first 429."""
        if self.accepted is not None:
            return
        while self._oks and self._oks[0] < now - 1.0:
            self._oks.popleft()
        if throttled:
            self.accepted = len(self._oks)
            self._oks.clear()
        else:
            self._oks.append(now)

    def pace(self) -> float:
        """The pace of a trial below the first refusals: half the slowest one refused."""
        if self.refused_at is not None:
            return self.refused_at / 2
        return max(TRIAL.deep_rate, (self.accepted or 0) / 4)

    def refused(self, pace: float, now: float) -> None:
        """A trial below the first refusals at `pace` was refused: the share is weather down
        to that pace. A limit below it (a shedder refusing a share above 3 a second) refuses
        the same share at every pace above it: only a pace below it tells, so the weather's
        next re-test that changes nothing is tried at half that pace (`lower`)."""
        self.refused_at, self._refused_when = pace, now

    def lower(self, now: float) -> bool:
        """Whether a trial below the first refusals is to be tried now: none was yet, or the
        last one refused was above `TRIAL.deepest_rate` and `WEATHER.retest_s` ago (a re-test of the
        weather). One at a time, as weather refuses a slow trial only after about
        `1 / (share x pace)` seconds (14 % at 2/s: 4 s) while the whole load waits at that
        pace."""
        return self.pace() >= TRIAL.deepest_rate and now - self._refused_when >= WEATHER.retest_s


class RetriedAnswers:
    """Whether 429s are the requests' or the pace's: the latest answers to first attempts and
    to retries of refused requests (not thread-safe: the pacer's lock is held).

    A retry goes out at the same pace as a first attempt, so a limit on the pace (a bucket, a
    shedder) or on the tenant (weather) refuses both alike. When first attempts are refused
    and their retries answered (an API refusing each path once, then answering it), the
    refusal follows the request: no pace would change it.
    """

    def __init__(self) -> None:
        # (paced at, refused) of the latest answers of each kind
        self._first: deque[tuple[float, bool]] = deque(maxlen=WEATHER.share_answers)
        self._retried: deque[tuple[float, bool]] = deque(maxlen=WEATHER.share_answers)

    def note(self, paced_at: float, throttled: bool, retried: bool) -> None:
        (self._retried if retried else self._first).append((paced_at, throttled))

    def clear_on_retry(self) -> bool:
        """The latest retries `spared` against the first attempts paced since the oldest of
        them. Compared over the same time, not since a cut:
        a bucket's overshoot refuses first attempts, and their retries come after the cut.
        Asked at every 429, so far from its noise: 14 % weather refuses none of 10 retries
        one time in five, and a run asks hundreds of times."""
        if len(self._retried) < RETRY.known:
            return False
        since = min(paced_at for paced_at, _ in self._retried)
        first = [refused for paced_at, refused in self._first if paced_at >= since]
        again = sum(refused for _, refused in self._retried)
        return spared(sum(first), len(first), again, len(self._retried))
