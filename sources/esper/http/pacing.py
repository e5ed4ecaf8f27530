"""The pace of the client's requests: how many are in flight (`AdaptiveLimiter`), and how many
are sent a second (`RatePacer`: the rate learnt from the tenant's 429s, telling this run's
overshoot from refusals it did not cause). What a 429 then waits for is `policy.decide`'s.

The limiter starts at about 20 requests in flight (the API's guidance), doubles per window of
healthy answers until the first 429, then adds one slot per window and halves on a 429 (AIMD).

A tenant's API sits behind a rate limit (a token bucket: so many requests per second, answered
429 beyond it) that it shares with the admin's console, Esper's own tools and other
integrations. Bounding requests *in flight* does not bound requests *per second*, so every
request also passes this pacer:

* Until the first 429 it does not pace at all: a tenant without a tight limit is read at full
  speed. The first cut waits for `MIN_SPAN_S` of answers after the run's first second (its
  first device pages, one at a time, say nothing of the API's rate) and is measured on them,
  unless most answers are refused (the bucket is empty: that is never weather).
* A 429 that is news cuts the pace of *every* worker to a little below the rate the API was
  answering (`CUT` x the requests sent and not refused over the last `WINDOW_S` seconds, and
  below the pace that was refused). 429s for requests paced before the last cut are the same
  overshoot and cut nothing.
* **Every cut is a trial.** A rate limit this run overshoots refuses less once the pace is
  below it; refusals caused by someone else (the tenant's "weather": other clients spending the
  same budget) keep coming at the same share whatever this run's pace. So the pacer counts the
  answers to the first `TRIAL_ANSWERS` requests paced after a cut: if the refusals above the
  known weather at least halved, the cut was right (and if some remain, it cuts again to see
  whether those are this run's too). If they did not, the pace is tried below the pace that
  first drew refusals (`Trial`, `FirstRefusals`: a shedder refusing a share above N a second
  refuses the same share at every pace above N): any refusal there and every cut no trial
  showed to help is undone, their share becoming the weather (the next cut then waits for a
  second of answers at the pace come back to); none, and the cut stands. Each re-test of the
  weather tries half the last such pace, down to `DEEPEST_RATE`: a limit below
  `DEEP_RATE` is found there. A 429 within the weather (the refused share
  of the last `SHARE_ANSWERS` answers no more than the weather plus a margin) cuts nothing: the
  client retries that one request after its own `Retry-After` and keeps the pace (`cuts_pace`
  returns False for it). The weather is forgotten once the refused share falls to half of it.
* A run's first requests, sent one at a time, already are such a trial: where the first cut
  would come, if some of them were refused and the fast requests are refused about as often
  (`FirstRefusals.slow_share_holds`), that share is weather from the start and nothing is cut.
* A 429 on a first attempt while the retries of refused requests, paced alike, are answered
  (`RetriedAnswers`: an API refusing each path once) is the request's: it cuts nothing, and
  the cuts no trial showed to help are undone.
* Between 429s the pace grows back: quickly (`FAST_GROWTH` per second, as TCP's slow start after
  loss ends) up to `NEAR` x the last good rate (the ceiling), then slowly (`SLOW_GROWTH` per
  second) past it, so it finds a raised limit again and spends a long time near the allowed rate
  for each overshoot.
* The pace never drops below `FLOOR_SHARE` x the best rate the API answered in this run (or
  `MIN_RATE` before anything was answered), and requests are spaced evenly (`1 / rate` apart),
  never sent as a burst after a wait.

A refused share above `WEATHER_MAX` is never weather (an exhausted quota, an outage): cuts go on.
Measured behind token buckets, neighbours and weather: bench/README.md "Polite client".
"""

from __future__ import annotations

import logging
import math
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .errors import STOP_POLL_S

log = logging.getLogger("esper_warehouse.client")

WINDOW_S = 2.0  # sends counted to estimate the rate the API answers
MIN_SPAN_S = 1.0  # ... over at least this span
CUT = 0.8  # after a 429: this share of the answered rate
NEAR = 0.95  # grow fast up to this share of the ceiling, then slowly
FAST_GROWTH = 0.5  # per second, relative
SLOW_GROWTH = 0.005  # per second, relative, past the ceiling at first ...
PROBE_DOUBLING_S = 12.0  # ... doubling every this many seconds without a cut (a raised limit)
FLOOR_SHARE = 0.1  # the pace never drops below this share of the best answered rate ...
MIN_RATE = 0.5  # ... nor below this many requests a second before anything was answered
SHARE_ANSWERS = 100  # the latest answers the refused share is judged over
RESIDUE = 0.02  # refusals above the weather left after a cut: cut again to find out whose
WEATHER_MARGIN = 0.05  # refusals within weather + this (or 3 standard errors) are weather
WEATHER_MAX = 0.5  # a refused share above this is not weather
RETEST_S = 30.0  # in weather, a 429 this long after the last cut cuts anyway, to check it
LEARN_AFTER_S = 0.25  # a 429 before this much traffic holds every request, and cuts nothing
KNOWN_ANSWERS = 20  # the first cut waits for this many answers and MIN_SPAN_S of traffic ...


# The weather judgement's evidence: a cut on trial, and the pace that first drew refusals.
TRIAL_ANSWERS = 30  # answers to requests paced after a cut that tell whether it helped
TRIAL_REFUSALS = 8  # ... fewer, when this many of them and most (60 %) were refused
DEEP_RATE = 8.0  # a trial below the first refusals is never slower than this ...
DEEP_ANSWERS = 40  # ... and, when nothing is refused, ends after this many answers
SLOW_ANSWERS = 5  # answers to requests sent below DEEP_RATE that stand for such a trial
DEEPEST_RATE = 2.0  # ... and one refused is tried at half its pace at the next re-test, down
# to this pace (a shedder refusing a share above 3 a second is found at 2/s)

# Refusals of the request, not of the pace: a retry is sent at the same pace as a first attempt.
RETRIES_KNOWN = 5  # answers to retries of refused requests before they are compared ...
RETRY_CHANCE = 1e-3  # ... and how seldom a pace-bound refusal would spare them as often


def noise(share: float, answers: int) -> float:
    """The standard error of a refused share measured over `answers` answers."""
    return math.sqrt(share * (1 - share) / answers)


@dataclass
class Trial:
    """A cut under test: the share it was cut at, and the answers since."""

    at: float  # when the cut was made (the pacer's clock)
    share_before: float  # refused share of the latest answers when the cut was made
    judged: bool = True  # False for the first cut of a run (from no pace at all)
    answers: int = 0  # answers to requests paced after the cut
    refused: int = 0
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

    def done(self) -> bool:
        """Enough answers to judge the cut. A trial where most answers are refused is over
        early (that is never weather); a trial below the first refusals at its first refusal."""
        if self.deep:
            return self.refused >= 1 or self.answers >= DEEP_ANSWERS
        overshot = self.refused >= TRIAL_REFUSALS and self.refused > 0.6 * self.answers
        return overshot or self.answers >= TRIAL_ANSWERS

    def share_with_the_last(self) -> float:
        """The refused share over this trial and the one before it (the share it was cut at):
        when both saw the same share, the weather is measured on both."""
        refused = self.share_before * TRIAL_ANSWERS + self.refused
        return refused / (TRIAL_ANSWERS + self.answers)


class FirstRefusals:
    """The pace that first drew refusals, the answers to the run's slow first requests, and
    whether a trial below it saw the share (not thread-safe: the pacer's lock is held).

    That pace is the answers accepted in the second before the run's first 429 (a count per
    second, as a bucket or a shedder counts). The trial below it runs at a quarter of it (a
    bucket first refuses after its second of saved tokens and a second of its rate; a shedder
    after a few refusals above its N), never slower than `DEEP_RATE`: under weather the first
    429 comes after a handful of answers, by chance, and a trial's answers take
    `DEEP_ANSWERS / pace` seconds.
    """

    def __init__(self) -> None:
        self.accepted: int | None = None  # answers accepted in the second before the first 429
        self._oks: deque[float] = deque()  # times of accepted answers until then
        # The pace of the slowest trial below it that was refused (None: none yet): the next
        # one (the weather's next re-test) is tried at half that pace.
        self.refused_at: float | None = None
        self._refused_when = -math.inf  # ... and when it was cut to (the pacer's clock)
        # Until the first cut: answers to requests sent while this run sent fewer than
        # DEEP_RATE a second (its first requests, one at a time), and how many were refused.
        self.slow_answers = 0
        self.slow_refused = 0

    def note_pace(self, others: int, throttled: bool) -> None:
        """Count an answer to a request sent with `others` sent in the second before it and
        until its answer, until the first cut: one sent slower than a trial below the first
        refusals would pace is that trial's evidence."""
        if others < DEEP_RATE:
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
        if self.slow_refused == 0 or slow < SLOW_ANSWERS or share >= WEATHER_MAX:
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
        return max(DEEP_RATE, (self.accepted or 0) / 4)

    def refused(self, pace: float, now: float) -> None:
        """A trial below the first refusals at `pace` was refused: the share is weather down
        to that pace. A limit below it (a shedder refusing a share above 3 a second) refuses
        the same share at every pace above it: only a pace below it tells, so the weather's
        next re-test that changes nothing is tried at half that pace (`lower`)."""
        self.refused_at, self._refused_when = pace, now

    def lower(self, now: float) -> bool:
        """Whether a trial below the first refusals is to be tried now: none was yet, or the
        last one refused was above `DEEPEST_RATE` and `RETEST_S` ago (a re-test of the
        weather). One at a time, as weather refuses a slow trial only after about
        `1 / (share x pace)` seconds (14 % at 2/s: 4 s) while the whole load waits at that
        pace."""
        return self.pace() >= DEEPEST_RATE and now - self._refused_when >= RETEST_S


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
        self._first: deque[tuple[float, bool]] = deque(maxlen=SHARE_ANSWERS)
        self._retried: deque[tuple[float, bool]] = deque(maxlen=SHARE_ANSWERS)

    def note(self, paced_at: float, throttled: bool, retried: bool) -> None:
        (self._retried if retried else self._first).append((paced_at, throttled))

    def clear_on_retry(self) -> bool:
        """The latest retries (at least `RETRIES_KNOWN`) refused at most a quarter as often as
        the first attempts paced since the oldest of them, and seldom enough that retries
        refused as often as those (their share less two standard errors) would be so
        seldom one time in `1 / RETRY_CHANCE`. Compared over the same time, not since a cut:
        a bucket's overshoot refuses first attempts, and their retries come after the cut.
        Asked at every 429, so far from its noise: 14 % weather refuses none of 10 retries
        one time in five, and a run asks hundreds of times."""
        retries = len(self._retried)
        if retries < RETRIES_KNOWN:
            return False
        since = min(paced_at for paced_at, _ in self._retried)
        first = [refused for paced_at, refused in self._first if paced_at >= since]
        if not first:
            return False
        share = sum(first) / len(first)
        again = sum(refused for _, refused in self._retried)
        if again > retries * share / 4:
            return False
        hedged = (sum(first) + 1) / (len(first) + 2)  # a share of few answers is never sure
        low = max(0.0, share - 2 * noise(hedged, len(first)))
        chance = sum(
            math.comb(retries, k) * low**k * (1 - low) ** (retries - k) for k in range(again + 1)
        )
        return chance < RETRY_CHANCE


class RatePacer:
    """Spaces requests at a rate learnt from 429s (thread-safe).

    Args:
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.rate: float | None = None  # requests per second; None: not paced (no 429 yet)
        self.ceiling: float | None = None  # the pace the API allowed when the last cut came
        self.best = 0.0  # the best answered rate measured in this run (requests per second)
        self.weather = 0.0  # refused share that cutting the pace did not change
        self._weather_answers = SHARE_ANSWERS  # the answers the weather was measured on
        self.cuts = 0  # cuts that stood (for the run's record)
        self.not_ours = 0  # 429s within the weather: not caused by this run's pace
        self._trial: Trial | None = None
        self._next = 0.0  # the earliest time the next request may be sent
        self._sent: deque[float] = deque()  # send times in the last window
        self._refused: deque[float] = deque()  # times of 429 answers in the last window
        self._latest: deque[bool] = deque(maxlen=SHARE_ANSWERS)  # True: refused
        self._last_cut = float("-inf")
        self._grown_at = 0.0
        self._first_sent: float | None = None
        self._lately = 0.0  # the refused share, an average over about SHARE_ANSWERS answers
        self._first = FirstRefusals()
        self._undone_at = -math.inf  # when cuts were last undone (their trial called weather)
        # The pace before the earliest cut no trial has shown to help, and how many such cuts
        # since: refusals that turn out not to depend on the pace undo them all.
        self._undo: tuple[float | None, float | None] | None = None
        self._unproven = 0
        self._retried = RetriedAnswers()
        self.refused_once = False  # 429s cleared by their retry: the requests', not the pace's

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
            if self._first_sent is None:
                self._first_sent = at
            return at - now

    def respace(self, reserved_at: float, slot: float) -> float | None:
        """Before a request that waited for its slot is sent: when the pace was cut since it was
        reserved (at `reserved_at`, for `slot`), the slot, spaced at the old pace, is given up
        for a new one.

        Returns:
            The seconds to wait for the new slot, or None (the slot stands: send now).
        """
        with self._lock:
            if self._last_cut <= reserved_at:
                return None
            for taken in self._sent:
                if abs(taken - slot) < 1e-6:
                    self._sent.remove(taken)
                    break
        return self.reserve()

    def cuts_pace(
        self, throttled: bool, reserved_at: float | None = None, retried: bool = False
    ) -> bool:
        """Record an answer; whether it cut the pace (a 429, `throttled`, that is news does).

        Args:
            throttled: the answer was a 429.
            reserved_at: when the request took its slot (`reserve`, the pacer's clock); a 429
                for a request paced before the last cut is the same overshoot, not news.
            retried: the request was refused (429) before: a 429 on a first attempt while
                such retries are answered is the request's (`RetriedAnswers`), not news.

        Returns:
            True when this answer cut the pace, or came before there was anything to learn
            from: the API's bucket is empty, and the caller holds every request for the
            answer's `Retry-After` (and halves the requests in flight). Any other 429 (the
            same overshoot, the tenant's weather, a cut on trial) waits for that request alone:
            the pace already keeps the rest below what the API answered.
        """
        with self._lock:
            now = self._clock()
            paced_at = reserved_at if reserved_at is not None else now
            for times in (self._sent, self._refused):
                while times and times[0] < now - WINDOW_S:
                    times.popleft()
            if throttled:
                self._refused.append(now)
            self._retried.note(paced_at, throttled, retried)
            if throttled and not retried and self._retried.clear_on_retry():
                return self._refused_once(now)
            self._latest.append(throttled)
            self._first.note(now, throttled)
            if self._last_cut == -math.inf and now - paced_at <= WINDOW_S - 1.0:
                # The others sent in the second before it and since (those sent with it count:
                # a burst is not slow); no cut yet, so no pace: the sends are in time order.
                sent = self._sent
                around = bisect_right(sent, now) - bisect_right(sent, paced_at - 1.0) - 1
                self._first.note_pace(around, throttled)
            trial = self._trial
            if trial is not None and paced_at > trial.at:
                if not trial.counts(paced_at, now):
                    return False  # paced while the API still counted the faster pace
                trial.answers += 1
                trial.refused += throttled
                return trial.done() and self._judge(trial, now, self._measure(now))
            # The refused share lately, to forget weather that cleared (the neighbour left):
            # it only lowers the weather, and only once halved (a low sample of a steady share
            # would otherwise ratchet it down; a rise is this run's overshoot until cuts show
            # otherwise).
            self._lately += (throttled - self._lately) / SHARE_ANSWERS
            if self._lately < self.weather / 2:
                self.weather = self._lately if self._lately >= RESIDUE else 0.0
                self._weather_answers = SHARE_ANSWERS
            if not throttled:
                return False
            if paced_at <= self._last_cut:
                return False  # paced before the last cut: that cut already answered it
            within_weather = self.weather and self._share() <= self._weather_limit()
            if within_weather and now - self._last_cut < RETEST_S:
                self.not_ours += 1
                return False
            # (Within the weather, now and then a cut all the same, to see whether the share
            # still holds at a lower pace: the neighbour may have left, the rest be this run's.)
            if self._first_sent is None or now - self._first_sent < LEARN_AFTER_S:
                return True  # too early to tell a rate: everyone waits, nothing is learnt
            if not self._answers_known(now):
                # A cut waits for a second of answers; meanwhile a 429 among answers mostly
                # refused holds everyone (the bucket is empty), any other waits for itself.
                return self._mostly_refused()
            if self._last_cut == -math.inf:
                seen = self._first.slow_share_holds(self._share(), len(self._latest))
                if seen is not None:
                    return self._weather_from_the_start(now, seen, len(self._latest))
            return self._cut(now, self._measure(now, self._since(now)), self._share())

    def _measure(self, now: float, since: float = -math.inf) -> float | None:
        """The answered rate now, remembered as the run's best if it is (lock held). Measured
        only when a decision needs it: counting the window on every answer would cost the hot
        path O(window) per request."""
        accepted = self._accepted_rate(now, since)
        if accepted is not None and accepted > self.best:
            self.best = accepted
        return accepted

    def _share(self) -> float:
        """The refused share of the latest answers (lock held)."""
        return sum(self._latest) / len(self._latest) if self._latest else 0.0

    def _mostly_refused(self) -> bool:
        """Most of the latest answers refused, and enough of them to say so (lock held): the
        bucket is empty, never weather. Not from a handful: under 14 % weather one of a run's
        first two answers is refused one run in four, and every such 429 held every request and
        halved the requests in flight (bench/README.md "Polite client", scenario 6)."""
        return self._share() >= WEATHER_MAX and sum(self._latest) >= TRIAL_REFUSALS

    def _answers_known(self, now: float) -> bool:
        """Whether the run's first cut may come now (lock held): after `MIN_SPAN_S` of traffic
        and `KNOWN_ANSWERS` answers (a first second of one request at a time, while the first
        pages load, says nothing of the API's rate), or at once when most answers are refused
        (never weather: the bucket is empty)."""
        if self._last_cut > -math.inf:
            return now - self._undone_at >= MIN_SPAN_S
        if self._mostly_refused():
            return True
        assert self._first_sent is not None
        return now - self._first_sent >= 2 * MIN_SPAN_S and len(self._latest) >= KNOWN_ANSWERS

    def _since(self, now: float) -> float:
        """The sends a cut is measured on (lock held): those since cuts were last undone (a
        window holding a slower trial understates the rate), and for a first cut that waited
        for the answers, those after the run's first second."""
        if self._last_cut > -math.inf or self._first_sent is None:
            return self._undone_at
        late = self._first_sent + MIN_SPAN_S
        return late if now - late >= MIN_SPAN_S else -math.inf

    def _weather_limit(self) -> float:
        """The refused share of the latest answers still called weather (lock held)."""
        noisy = noise(self.weather, self._weather_answers)
        return self.weather + max(WEATHER_MARGIN, 3 * noisy)

    def _accepted_rate(self, now: float, since: float = -math.inf) -> float | None:
        """Requests sent and not refused per second over the last window (lock held).

        Sent, not answered: a 429 comes back before the answers of the requests sent with it,
        so counting answers would understate the rate. Over at least MIN_SPAN_S: the first
        requests of a run use the bucket's saved tokens. Slots reserved for later are not sent.
        """
        sent = [t for t in self._sent if since < t <= now]
        accepted = len(sent) - sum(1 for t in self._refused if t > since)
        if accepted <= 0 or not sent:
            return None
        return accepted / max(MIN_SPAN_S, now - sent[0])

    def _floor(self) -> float:
        return FLOOR_SHARE * self.best if self.best else MIN_RATE

    def _cut(self, now: float, accepted: float | None, share: float) -> bool:
        """Cut the pace below the answered rate and put the cut on trial (lock held).

        Args:
            share: the refused share at the pace being cut, to compare the trial's with.

        Returns:
            True (the pace was cut, or nothing was answered yet to learn a pace from).
        """
        before = Trial(now, share, judged=self.rate is not None)
        pace_before = (self.rate, self.ceiling)
        if accepted is not None:
            # The pace that delivers `accepted` answers when the weather refuses its share.
            allowed = accepted / (1 - self.weather)
            self.ceiling = allowed
            paced = CUT * self.rate if self.rate is not None else float("inf")
            self.rate = max(self._floor(), min(CUT * allowed, paced))
        elif self.rate is not None:  # nothing answered lately: halve the pace
            self.rate = max(self._floor(), self.rate / 2)
        else:  # nothing to learn from yet: the retry's own wait (backoff, Retry-After) rules
            return True
        self._trial = before
        self._on_trial(now, pace_before)
        # the next request waits one interval: the bucket the 429 came from is empty
        self._next = max(self._next, now + 1.0 / self.rate)
        (log.info if self.cuts == 1 else log.debug)(
            "429: pacing every request at %.1f/s, below the %s the API answered", self.rate,
            f"{accepted:.1f}/s" if accepted is not None else "rate",
        )  # fmt: skip
        return True

    def _judge(self, trial: Trial, now: float, accepted: float | None) -> bool:
        """Decide whether the cut on trial changed the refusals (lock held).

        * Almost no refusals after the cut (at most `RESIDUE` of the trial's answers): they
          were all this run's; the cut stands and the weather is forgotten.
        * At least half of the excess refusals (above the weather) gone: the excess was this
          run's; the cut stands, and if refusals above the weather remain, it cuts again to
          see whether those are this run's too.
        * Otherwise the refusals came at the same share at a lower pace. A trial below the
          pace that first drew refusals runs now (`_cut_below`), below the last one refused
          (`FirstRefusals.lower`): none refused, and the cut stands; any, and they are weather
          down to that pace (the next re-test tries half of it, down to `DEEPEST_RATE`). The
          first cut of a run is never undone this way (it comes from no pace at all, with the
          bucket's saved tokens in the share before it): a second cut is tried first.

        A cut that stands without having shown that it helped (the share still above
        `WEATHER_MAX`, the run's first) is undone with the cuts after it when those turn out
        to be weather (`_undo_cuts`).

        Returns:
            True when it cut the pace again.
        """
        self._trial = None
        self._weather_answers = SHARE_ANSWERS
        after = trial.refused / trial.answers
        if self.rate is not None:
            # What the trial's pace delivered: a bucket's rate if the pace is still above it
            # (the window's count may still hold the bucket's saved tokens, or a wait that held
            # every request).
            accepted = self.rate * (1 - after)
        before = trial.share_before
        if trial.deep and trial.refused:  # refused below the first refusals' pace: weather
            assert self.rate is not None
            self._first.refused(self.rate, trial.at)  # a re-test comes RETEST_S after it
            return self._weather(trial, now)
        if after <= RESIDUE:
            self.weather = 0.0
            self._undo, self._unproven = None, 0  # the cuts were this run's
            if trial.deep and self.ceiling is not None:  # a limit below the first refusals:
                self.best = min(self.best, self.ceiling)  # the floor follows it, not the blast
            return False
        weather = self.weather
        if after < weather / 2:
            self.weather = after  # less than the weather at a lower pace: some was this run's
        # Not a lucky pair of trials: the drop is over 3 standard errors of a difference of two
        # shares of about as many answers, both drawn from their common share (one trial far
        # above the weather by chance, then one near it, must not pass for a limit).
        spread = math.sqrt(2) * noise(trial.share_with_the_last(), trial.answers)
        helped = after - weather < (before - weather) / 2 and before - after > 3 * spread
        if helped:
            self._undo, self._unproven = None, 0  # the cuts were this run's
        if trial.judged and (helped or after > WEATHER_MAX):
            weather = self.weather
            if after > weather + max(RESIDUE, 2 * noise(weather, TRIAL_ANSWERS)):
                return self._cut(now, accepted, after)
            return False
        if not trial.judged:
            return self._cut(now, accepted, after)
        if self._first.lower(now) and self.rate is not None and self.rate > self._first.pace():
            return self._cut_below(now, trial.share_with_the_last())
        return self._weather(trial, now)

    def _on_trial(self, now: float, pace_before: tuple[float | None, float | None]) -> None:
        """Count a cut just made, from `pace_before` (rate, ceiling) (lock held)."""
        if self._undo is None:
            self._undo = pace_before
        self._unproven += 1
        self._last_cut = self._grown_at = now
        self.cuts += 1

    def _undo_cuts(self, now: float) -> None:
        """Back to the pace before every cut no trial showed to help (lock held): all of them
        were made while the refusals did not depend on the pace, not only the last trial's."""
        self._trial = None
        if self._undo is not None:
            self.rate, self.ceiling = self._undo
            self.cuts -= self._unproven
        self._undo, self._unproven = None, 0
        self._grown_at = self._undone_at = now
        self._next = now

    def _refused_once(self, now: float) -> bool:
        """A first attempt refused while the retries of refused requests are answered
        (`RetriedAnswers.clear_on_retry`): the request's refusal, not the pace's (lock held).
        It waits for itself, teaches the pace nothing, and the cuts no trial showed to help
        are undone (they were made from such refusals).

        Returns:
            False (no cut).
        """
        self.not_ours += 1
        if self._undo is not None or not self.refused_once:
            self._undo_cuts(now)
            pace = f"keeping {self.rate:.1f} requests/s" if self.rate else "not pacing"
            (log.info if not self.refused_once else log.debug)(
                "429s answered on their retry (the API refuses a request once, whatever the "
                "pace): refusals not caused by this run's pace: %s",
                pace,
            )
        self.refused_once = True
        return False

    def _weather(self, trial: Trial, now: float) -> bool:
        """The refused share held at a lower pace: not this run's doing (lock held). Every cut
        no trial showed to help is undone (`_undo_cuts`) and the share, over this trial and
        the one before, remembered as the weather.

        Returns:
            False (no cut).
        """
        # A trial below the first refusals ends at its first refusal: its share says little
        # (one of a handful of answers), the two trials above it measured the weather.
        after = trial.share_before if trial.deep else trial.share_with_the_last()
        news = self.weather == 0.0
        self.weather = after if news else (self.weather + after) / 2
        self._lately = max(self._lately, self.weather)
        self._undo_cuts(now)
        pace = f"keeping {self.rate:.1f} requests/s" if self.rate else "not pacing"
        (log.info if news else log.debug)(
            "%.0f%% of requests refused whatever this run's pace (the tenant's rate limit is "
            "shared): refusals not caused by this run's pace: %s",
            100 * self.weather,
            pace,
        )
        return False

    def _weather_from_the_start(self, now: float, share: float, answers: int) -> bool:
        """The first cut would be tried where the run's slow first requests were refused as
        often as its fast ones (`FirstRefusals.slow_share_holds`): weather, no cut (lock held).
        Counted from now as a cut undone: the 429s of requests paced before it cut nothing,
        and a later cut waits for a second of answers. Its margin is that of a share of these
        few `answers` (7 % measured on 40 answers may well be 14 %).

        Returns:
            False (no cut).
        """
        self.weather, self._weather_answers = share, answers
        # The slow requests stand for a trial at DEEP_RATE that was refused: a retest that
        # changes nothing tries below them (a limit below their pace refuses them too).
        self._first.refused(DEEP_RATE, now)
        self._lately = max(self._lately, share)
        self._last_cut = self._grown_at = self._undone_at = now
        log.info(
            "%.0f%% of requests refused, as many of those sent one at a time as of the others "
            "(the tenant's rate limit is shared): refusals not caused by this run's pace: not "
            "pacing",
            100 * share,
        )
        return False

    def _cut_below(self, now: float, share: float) -> bool:
        """Put a pace below the first refusals on trial (`FirstRefusals.pace`), before calling
        the share weather (lock held): the cuts before it are undone with it if the share
        holds there too.

        Returns:
            True (the pace was cut).
        """
        self._trial = Trial(now, share, counts_from=now + MIN_SPAN_S)
        pace_before = (self.rate, self.ceiling)
        self.rate = self._first.pace()
        self.ceiling = self.rate / CUT  # refusals came above it: grow back slowly past it
        self._on_trial(now, pace_before)
        log.debug("the same refusals at a lower pace: trying %.1f requests/s", self.rate)
        return True

    def _grow(self, now: float) -> None:
        """Raise the pace for the time since the last growth (lock held).

        Fast up to near the ceiling; past it, slowly at first and faster the longer no 429
        comes (the growth doubles every `PROBE_DOUBLING_S`), as CUBIC probes after a plateau:
        a limit that was raised is found within a minute, a steady one is overshot rarely.
        """
        elapsed = now - self._grown_at
        if elapsed <= 0 or self.rate is None:
            return
        self._grown_at = now
        if self._trial is not None:
            return  # a cut on trial holds its pace until it is judged
        near = NEAR * (self.ceiling or self.rate)
        if self.rate < near:
            grown = min(near, self.rate * (1 + FAST_GROWTH) ** elapsed)
        else:
            probing = max(0.0, now - self._last_cut - elapsed)
            growth = SLOW_GROWTH * 2 ** (probing / PROBE_DOUBLING_S)
            grown = self.rate * (1 + growth) ** elapsed
        self.rate = grown


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
