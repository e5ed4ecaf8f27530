"""The evidence of `pacing.RatePacer`'s weather judgement: a cut on trial (`Trial`), and the
pace that first drew refusals (`FirstRefusals`).

A limit (a token bucket, a load shedder refusing a share of the requests above N a second)
refuses nothing below the pace at which it first refused; the tenant's weather (other clients
spending the same budget) refuses the same share at every pace. A cut from far above such a
limit changes nothing either, so the refusals are called weather only once a trial *below* the
pace of the first refusals saw the same share: any refusal there is weather, none in
`DEEP_ANSWERS` answers is this run's (a shedder at 20 % refuses one of them with 99.99 %).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

TRIAL_ANSWERS = 30  # answers to requests paced after a cut that tell whether it helped
TRIAL_REFUSALS = 8  # ... fewer, when this many of them and most (60 %) were refused
DEEP_RATE = 8.0  # a trial below the first refusals is never slower than this ...
DEEP_ANSWERS = 40  # ... and, when nothing is refused, ends after this many answers


def noise(share: float, answers: int) -> float:
    """The standard error of a refused share measured over `answers` answers."""
    return math.sqrt(share * (1 - share) / answers)


@dataclass
class Trial:
    """A cut under test: what it changed, to undo it if the refusals stay the same."""

    at: float  # when the cut was made (the pacer's clock)
    rate_before: float | None  # the pace to come back to if the refusals stay (None: unpaced)
    ceiling_before: float | None
    share_before: float  # refused share of the latest answers when the cut was made
    judged: bool = True  # False for the first cut of a run (from no pace at all)
    cuts: int = 1  # the cuts undone with it (2 when it follows the run's first)
    answers: int = 0  # answers to requests paced after the cut
    refused: int = 0
    # A trial below the first refusals counts the answers to requests paced from this time on
    # (a second after its cut: a bucket or a shedder counts the second before); None: `at`.
    counts_from: float | None = None

    @property
    def deep(self) -> bool:
        """A trial below the pace that first drew refusals."""
        return self.counts_from is not None

    def counts(self, paced_at: float) -> bool:
        """Whether the answer to a request paced at this time is the trial's."""
        return paced_at > (self.at if self.counts_from is None else self.counts_from)

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
    """The pace that first drew refusals, and whether a trial below it saw the share (not
    thread-safe: the pacer's lock is held).

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
        self.shown = False  # a trial below it saw the share: weather is weather from now on

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
        """The pace of a trial below the first refusals."""
        return max(DEEP_RATE, (self.accepted or 0) / 4)
