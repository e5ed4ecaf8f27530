"""The engine's state and the small tools every part of it uses.

:class:`EngineBase` holds the fleet, the one RNG (seeded by the simulator seed, so the same
seed gives the same fleet), the queue of scheduled status steps and the running rollouts; its
helpers draw Poisson counts, pick live devices and schedule a step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from esper_warehouse.simulator.dynamics.pipeline_book import PipelineBook
from esper_warehouse.simulator.fleet import Fleet

if TYPE_CHECKING:
    from esper_warehouse.simulator.dynamics.rollouts import Campaign


class EngineBase:
    """State of the engine and the helpers its parts share."""

    def __init__(self, fleet: Fleet, seed: int, scenario: str | None = None) -> None:
        self.f = fleet
        self.scenario = scenario  # a name of `people.SCENARIOS`, or None: the coherent tenant
        self.rng = random.Random(f"{seed}:dynamics")
        self.heap: list[tuple[int, int, str, int]] = []
        self.seq = 0
        self.campaigns: list[Campaign] = []
        # releases being rolled out: (kind, ref, app platform) -> (version, regions not started)
        self.releases: dict[tuple[str, int, int], tuple[int, list[int]]] = {}
        self.rollout_carry = 0.0  # fractional deliveries carried from one tick to the next
        self.on_midnight: Callable[[int], None] | None = None
        self.after_run: Callable[[int, int], None] | None = None  # (from, to): faults.py
        self._members: dict[int, set[int]] = {}  # leaf group -> device indexes (lazy)
        self._members_upto = 0  # devices [0, _members_upto) are in _members
        # Esper Pipelines (`pipelines.py`): their own RNG, so the rest of the history is the
        # same with or without them; scheduled steps are (action, index) pairs
        self.book = PipelineBook()
        self.pipe_rng = random.Random(f"{seed}:pipelines")
        # the showcase pipelines' own (pipelines.SHOWCASE): the scripted runs stay as they were
        self.show_rng = random.Random(f"{seed}:pipelines:showcase")
        self.pipe_steps: list[tuple[str, int]] = []
        self.pipe_plans: list[tuple[int, dict]] = []  # runs to start: (pipeline, admin's acts)

    def _poisson(self, lam: float) -> int:
        if lam <= 0:
            return 0
        if lam > 30:
            return max(0, round(self.rng.gauss(lam, math.sqrt(lam))))
        k, p, limit = 0, 1.0, math.exp(-lam)
        while True:
            p *= self.rng.random()
            if p <= limit:
                return k
            k += 1

    def _pick_live(self, reachable: bool = True) -> int:
        f = self.f
        n = len(f.ids)
        for _ in range(20):
            i = self.rng.randrange(n)
            if not f.removed[i] and (not reachable or (not f.dark[i] and f.last_seen[i] >= 0)):
                return i
        return -1

    def _sample_live(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            i = self._pick_live(reachable=False)
            if i >= 0:
                out.append(i)
        return out

    def _members_of(self, group: int) -> set[int]:
        """Indexes of the devices in ``group`` (removed ones included), kept up to date."""
        f = self.f
        for i in range(self._members_upto, len(f.ids)):
            self._members.setdefault(f.group[i], set()).add(i)
        self._members_upto = len(f.ids)
        return self._members.setdefault(group, set())
