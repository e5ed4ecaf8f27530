"""How many requests are sent a second (`RatePacer`): the rate learnt from the tenant's 429s,
telling this run's overshoot from refusals it did not cause. How many are in flight is
`limiter.AdaptiveLimiter`'s; what a 429 then waits for is `policy.decide`'s.

A tenant's API sits behind a rate limit (a token bucket: so many requests per second, answered
429 beyond it) shared with the admin's console, Esper's own tools and other integrations.
Bounding requests *in flight* does not bound requests *per second*, so every request also
passes this pacer:

* Until the first 429 it does not pace at all: a tenant without a tight limit is read at full
  speed. The first cut waits for `MEASURE.min_span_s` of answers after the run's first second
  (its first device pages, one at a time, say nothing of the API's rate) and is measured on
  them, unless most answers are refused (the bucket is empty).
* A 429 that is news cuts the pace of *every* worker to a little below the rate the API was
  answering (`CUT.share` x the requests sent and not refused over the last
  `MEASURE.window_s`, and below the pace that was refused). 429s for requests paced before
  the last cut are the same overshoot and cut nothing.
* **Every cut is a trial** (`_judge`; the evidence and its rules: `weather.py`). Refusals this
  run caused drop once the pace is below the limit; the tenant's "weather" (other clients
  spending the same budget, an API refusing each request once) keeps its share whatever this
  run's pace. A cut that changed nothing is tried below the pace that first drew refusals;
  refused there too, the share is weather: every cut no trial showed to help is undone, and
  so is every halving of the requests in flight by the same 429s. A 429 within the weather
  cuts nothing: its request waits for its own `Retry-After` (`cuts_pace` returns False).
* Between 429s the pace grows back: quickly (`GROWTH.fast` per second, as TCP's slow start
  after loss ends) up to `GROWTH.near` x the last good rate (the ceiling), then slowly
  (`GROWTH.slow` per second, doubling every `GROWTH.probe_doubling_s`) past it, so it finds a
  raised limit again and spends a long time near the allowed rate for each overshoot.
* The pace never drops below `CUT.floor_share` x the best rate the API answered in this run (or
  `CUT.min_rate` before anything was answered), and requests are spaced evenly (`1 / rate`
  apart), never sent as a burst after a wait.

Measured behind token buckets, neighbours and weather: bench/README.md "Polite client"; the
rules' history: docs/decisions.md ("The pacer puts every cut on trial" and after).
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

from .limiter import AdaptiveLimiter
from .weather import TRIAL, WEATHER, FirstRefusals, RetriedAnswers, Trial, noise

log = logging.getLogger("esper_warehouse.client")


@dataclass(frozen=True)
class MeasureTuning:
    """How the rate the API answers is measured, and when a first cut may come."""

    window_s: float = 2.0  # sends counted to estimate the rate the API answers ...
    min_span_s: float = 1.0  # ... over at least this span
    known_answers: int = 20  # the first cut waits for this many answers and min_span_s ...
    learn_after_s: float = 0.25  # a 429 before this much traffic holds everyone, cuts nothing


@dataclass(frozen=True)
class CutTuning:
    """How deep a cut goes."""

    share: float = 0.8  # after a 429: this share of the answered rate
    floor_share: float = 0.1  # never below this share of the best answered rate ...
    min_rate: float = 0.5  # ... nor below this many requests a second before any was answered


@dataclass(frozen=True)
class GrowthTuning:
    """How the pace grows back between 429s."""

    near: float = 0.95  # grow fast up to this share of the ceiling, then slowly
    fast: float = 0.5  # per second, relative
    slow: float = 0.005  # per second, relative, past the ceiling at first ...
    probe_doubling_s: float = 12.0  # ... doubling every this many seconds without a cut


MEASURE = MeasureTuning()
CUT = CutTuning()
GROWTH = GrowthTuning()


class RatePacer:
    """Spaces requests at a rate learnt from 429s (thread-safe).

    Args:
        clock: monotonic seconds (injectable for tests).
        limiter: the client's limit of requests in flight, which a 429 holding every request
            halves: when those 429s turn out not to be the pace's, the halvings are undone too.
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, limiter: AdaptiveLimiter | None = None
    ) -> None:
        self._clock = clock
        self._limiter = limiter
        self._lock = threading.Lock()
        self.rate: float | None = None  # requests per second; None: not paced (no 429 yet)
        self.ceiling: float | None = None  # the pace the API allowed when the last cut came
        self.best = 0.0  # the best answered rate measured in this run (requests per second)
        self.weather = 0.0  # refused share that cutting the pace did not change
        self._weather_answers = WEATHER.share_answers  # the answers the weather was measured on
        self.cuts = 0  # cuts that stood (for the run's record)
        self.not_ours = 0  # 429s within the weather: not caused by this run's pace
        self._trial: Trial | None = None
        self._next = 0.0  # the earliest time the next request may be sent
        self._sent: deque[float] = deque()  # send times in the last window
        self._refused: deque[float] = deque()  # times of 429 answers in the last window
        self._latest: deque[bool] = deque(maxlen=WEATHER.share_answers)  # True: refused
        self._last_cut = float("-inf")
        self._grown_at = 0.0
        self._first_sent: float | None = None
        self._lately = 0.0  # the refused share, an average over about WEATHER.share_answers answers
        self._first = FirstRefusals()
        self._undone_at = -math.inf  # when cuts were last undone (their trial called weather)
        # The pace before the earliest cut no trial has shown to help, and how many such cuts
        # since: refusals that turn out not to depend on the pace undo them all.
        self._undo: tuple[float | None, float | None] | None = None
        self._unproven = 0
        # ... and the limit of requests in flight before the earliest 429 that held every
        # request since (it halved the limit): such 429s that were not the pace's undo it too.
        self._limit_before: tuple[int, bool] | None = None
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
            held = self._answer(throttled, reserved_at, retried)
            if held and self._limiter is not None and self._limit_before is None:
                self._limit_before = self._limiter.state()  # before the caller halves it
            return held

    def _answer(self, throttled: bool, reserved_at: float | None, retried: bool) -> bool:
        """`cuts_pace` (lock held)."""
        now = self._clock()
        paced_at = reserved_at if reserved_at is not None else now
        for times in (self._sent, self._refused):
            while times and times[0] < now - MEASURE.window_s:
                times.popleft()
        if throttled:
            self._refused.append(now)
        self._retried.note(paced_at, throttled, retried)
        if throttled and not retried and self._retried.clear_on_retry():
            return self._refused_once(now)
        self._latest.append(throttled)
        self._first.note(now, throttled)
        if self._last_cut == -math.inf and now - paced_at <= MEASURE.window_s - 1.0:
            # The others sent in the second before it and since (those sent with it count:
            # a burst is not slow); no cut yet, so no pace: the sends are in time order.
            sent = self._sent
            around = bisect_right(sent, now) - bisect_right(sent, paced_at - 1.0) - 1
            self._first.note_pace(around, throttled)
        trial = self._trial
        if trial is not None and paced_at > trial.at:
            if not trial.counts(paced_at, now):
                return False  # paced while the API still counted the faster pace
            trial.count(throttled, retried)
            return trial.done() and self._judge(trial, now, self._measure(now))
        # The refused share lately, to forget weather that cleared (the neighbour left):
        # it only lowers the weather, and only once halved (a low sample of a steady share
        # would otherwise ratchet it down; a rise is this run's overshoot until cuts show
        # otherwise).
        self._lately += (throttled - self._lately) / WEATHER.share_answers
        if self._lately < self.weather / 2:
            self.weather = self._lately if self._lately >= WEATHER.residue else 0.0
            self._weather_answers = WEATHER.share_answers
        if not throttled:
            return False
        if paced_at <= self._last_cut:
            return False  # paced before the last cut: that cut already answered it
        within_weather = self.weather and self._share() <= self._weather_limit()
        if within_weather and now - self._last_cut < WEATHER.retest_s:
            self.not_ours += 1
            return False
        # (Within the weather, now and then a cut all the same, to see whether the share
        # still holds at a lower pace: the neighbour may have left, the rest be this run's.)
        if self._first_sent is None or now - self._first_sent < MEASURE.learn_after_s:
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
        return self._share() >= WEATHER.max_share and sum(self._latest) >= TRIAL.refusals

    def _answers_known(self, now: float) -> bool:
        """Whether the run's first cut may come now (lock held): after `MEASURE.min_span_s` of
        traffic and `MEASURE.known_answers` answers (a first second of one request at a time,
        while the first pages load, says nothing of the API's rate), or at once when most
        answers are refused (never weather: the bucket is empty)."""
        if self._last_cut > -math.inf:
            return now - self._undone_at >= MEASURE.min_span_s
        if self._mostly_refused():
            return True
        assert self._first_sent is not None
        return (
            now - self._first_sent >= 2 * MEASURE.min_span_s
            and len(self._latest) >= MEASURE.known_answers
        )

    def _since(self, now: float) -> float:
        """The sends a cut is measured on (lock held): those since cuts were last undone (a
        window holding a slower trial understates the rate), and for a first cut that waited
        for the answers, those after the run's first second."""
        if self._last_cut > -math.inf or self._first_sent is None:
            return self._undone_at
        late = self._first_sent + MEASURE.min_span_s
        return late if now - late >= MEASURE.min_span_s else -math.inf

    def _weather_limit(self) -> float:
        """The refused share of the latest answers still called weather (lock held)."""
        noisy = noise(self.weather, self._weather_answers)
        return self.weather + max(WEATHER.margin, 3 * noisy)

    def _accepted_rate(self, now: float, since: float = -math.inf) -> float | None:
        """Requests sent and not refused per second over the last window (lock held).

        Sent, not answered: a 429 comes back before the answers of the requests sent with it,
        so counting answers would understate the rate. Over at least MEASURE.min_span_s: the first
        requests of a run use the bucket's saved tokens. Slots reserved for later are not sent.
        """
        sent = [t for t in self._sent if since < t <= now]
        accepted = len(sent) - sum(1 for t in self._refused if t > since)
        if accepted <= 0 or not sent:
            return None
        return accepted / max(MEASURE.min_span_s, now - sent[0])

    def _floor(self) -> float:
        return CUT.floor_share * self.best if self.best else CUT.min_rate

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
            paced = CUT.share * self.rate if self.rate is not None else float("inf")
            self.rate = max(self._floor(), min(CUT.share * allowed, paced))
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
        """What the cut on trial showed, question by question (lock held):

        1. Refused below the pace that first drew refusals? Weather down to that pace
           (`_refused_below`). The trial's retries answered while its first attempts were
           refused (`Trial.spared`)? The requests' refusals: every cut undone
           (`_refused_once`).
        2. Almost none refused (at most `WEATHER.residue`)? All were this run's: the cut
           stands, the weather is forgotten (`_all_ours`).
        3. At least half the refusals above the weather gone, beyond chance (`_helped`)? The
           cut stands; refusals above the weather that remain are cut again to see whose they
           are (`_cut_if_more_than_weather`). So too when the share stays above
           `WEATHER.max_share` (never weather), the cut standing unproven.
        4. The run's first cut (from no pace at all, the bucket's saved tokens in the share
           before it)? A second cut is tried before anything is called weather.
        5. No trial below the first refusals lately (`FirstRefusals.lower`)? One now
           (`_cut_below`): none refused there, and the cut stands.
        6. Otherwise the refusals came at the same share at a lower pace: weather, and every
           cut no trial showed to help is undone (`_weather`).

        Returns:
            True when it cut the pace again.
        """
        self._trial = None
        self._weather_answers = WEATHER.share_answers
        after = trial.refused / trial.answers
        if self.rate is not None:
            # What the trial's pace delivered: a bucket's rate if the pace is still above it
            # (the window's count may still hold the bucket's saved tokens, or a wait that held
            # every request).
            accepted = self.rate * (1 - after)
        if trial.deep and trial.refused:
            return self._refused_below(trial, now)
        if trial.spared():
            return self._refused_once(now, answer_refused=trial.last_refused)
        if after <= WEATHER.residue:
            return self._all_ours(trial)
        helped = self._helped(trial, after)
        if trial.judged and (helped or after > WEATHER.max_share):
            return self._cut_if_more_than_weather(now, accepted, after)
        if not trial.judged:
            return self._cut(now, accepted, after)
        if self._first.lower(now) and self.rate is not None and self.rate > self._first.pace():
            return self._cut_below(now, trial.share_with_the_last())
        return self._weather(trial, now)

    def _refused_below(self, trial: Trial, now: float) -> bool:
        """A trial below the first refusals was refused: weather down to its pace, the next
        re-test `WEATHER.retest_s` after it tries half of it (lock held). Returns False."""
        assert self.rate is not None
        self._first.refused(self.rate, trial.at)
        return self._weather(trial, now)

    def _all_ours(self, trial: Trial) -> bool:
        """Almost no refusals after the cut: they were all this run's (lock held). Returns
        False: the cut stands."""
        self.weather = 0.0
        self._proven()
        if trial.deep and self.ceiling is not None:  # a limit below the first refusals:
            self.best = min(self.best, self.ceiling)  # the floor follows it, not the blast
        return False

    def _helped(self, trial: Trial, after: float) -> bool:
        """Whether the refusals above the weather at least halved, by more than chance (lock
        held); a share after the cut below half the weather lowers the weather to it."""
        weather, before = self.weather, trial.share_before
        if after < weather / 2:
            self.weather = after  # less than the weather at a lower pace: some was this run's
        # Not a lucky pair of trials: the drop is over 3 standard errors of a difference of two
        # shares of about as many answers, both drawn from their common share (one trial far
        # above the weather by chance, then one near it, must not pass for a limit).
        spread = math.sqrt(2) * noise(trial.share_with_the_last(), trial.answers)
        helped = after - weather < (before - weather) / 2 and before - after > 3 * spread
        if helped:
            self._proven()
        return helped

    def _cut_if_more_than_weather(self, now: float, accepted: float | None, after: float) -> bool:
        """The cut stands; refusals above the weather beyond its noise are cut again (lock
        held). Returns whether it cut."""
        weather = self.weather
        if after > weather + max(WEATHER.residue, 2 * noise(weather, TRIAL.answers)):
            return self._cut(now, accepted, after)
        return False

    def _proven(self) -> None:
        """A trial showed the cuts were this run's: none of them is undone (lock held)."""
        self._undo, self._unproven, self._limit_before = None, 0, None

    def _on_trial(self, now: float, pace_before: tuple[float | None, float | None]) -> None:
        """Count a cut just made, from `pace_before` (rate, ceiling) (lock held)."""
        if self._undo is None:
            self._undo = pace_before
        self._unproven += 1
        self._last_cut = self._grown_at = now
        self.cuts += 1

    def _undo_cuts(self, now: float) -> None:
        """Back to the pace before every cut no trial showed to help, and to the limit of
        requests in flight before the 429s that held every request since (lock held): all were
        made while the refusals did not depend on the pace, not only the last trial's."""
        self._trial = None
        if self._undo is not None:
            self.rate, self.ceiling = self._undo
            self.cuts -= self._unproven
        if self._limit_before is not None and self._limiter is not None:
            self._limiter.restore(*self._limit_before)
        self._undo, self._unproven, self._limit_before = None, 0, None
        self._grown_at = self._undone_at = now
        self._next = now

    def _refused_once(self, now: float, answer_refused: bool = True) -> bool:
        """A first attempt refused while the retries of refused requests are answered
        (`RetriedAnswers.clear_on_retry`), or a trial whose retries were spared
        (`Trial.spared`): the requests' refusals, not the pace's (lock held). A refused answer
        waits for itself and teaches the pace nothing; the cuts no trial showed to help are
        undone (they were made from such refusals).

        Returns:
            False (no cut).
        """
        self.not_ours += answer_refused
        if self._undo is not None or self._limit_before is not None or not self.refused_once:
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
        # The slow requests stand for a trial at TRIAL.deep_rate that was refused: a retest that
        # changes nothing tries below them (a limit below their pace refuses them too).
        self._first.refused(TRIAL.deep_rate, now)
        self._lately = max(self._lately, share)
        self._last_cut = now
        self._undo_cuts(now)  # the halvings of the requests in flight by the first 429s
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
        self._trial = Trial(now, share, counts_from=now + MEASURE.min_span_s)
        pace_before = (self.rate, self.ceiling)
        self.rate = self._first.pace()
        self.ceiling = self.rate / CUT.share  # refusals came above it: grow back slowly past it
        self._on_trial(now, pace_before)
        log.debug("the same refusals at a lower pace: trying %.1f requests/s", self.rate)
        return True

    def _grow(self, now: float) -> None:
        """Raise the pace for the time since the last growth (lock held).

        Fast up to near the ceiling; past it, slowly at first and faster the longer no 429
        comes (the growth doubles every `GROWTH.probe_doubling_s`), as CUBIC probes after a plateau:
        a limit that was raised is found within a minute, a steady one is overshot rarely.
        """
        elapsed = now - self._grown_at
        if elapsed <= 0 or self.rate is None:
            return
        self._grown_at = now
        if self._trial is not None:
            return  # a cut on trial holds its pace until it is judged
        near = GROWTH.near * (self.ceiling or self.rate)
        if self.rate < near:
            grown = min(near, self.rate * (1 + GROWTH.fast) ** elapsed)
        else:
            probing = max(0.0, now - self._last_cut - elapsed)
            growth = GROWTH.slow * 2 ** (probing / GROWTH.probe_doubling_s)
            grown = self.rate * (1 + growth) ** elapsed
        self.rate = grown
