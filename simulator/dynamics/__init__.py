"""The simulated clock: how the fleet moves on as time passes.

``Engine.run_until(t)`` walks time in ticks of at most an hour. Per simulated day, at any fleet
size: about 2 % of devices change (``updated_at`` moves: settings and apps about 0.8 %, rollout
deliveries about 1.2 %), command requests and operations are issued in proportion to the fleet
and their per-device statuses walk forward through legal states over hours to days, a few
devices enroll, leave, go dark or come back. Rollouts (OS, app versions, blueprint versions) run
in waves in working hours; some devices fail and stay behind. Every per-day volume is a rate per
live device, so the daily changed share does not depend on the fleet size; the rates are
computed on at least ``MIN_ACTIVITY_FLEET`` devices so that a small test fleet still sees a few
changes a day. Check-ins move ``last_seen`` only, never ``updated_at``.
Everything is drawn from one RNG seeded by the simulator seed, so the same seed and the same
sequence of ``run_until`` calls give the same fleet.

The engine's parts live in the modules of this package: ``rates`` (the per-day rates),
``base`` (state and shared helpers), ``devices`` (single-device changes), ``rollouts``
(releases and campaigns), ``commands`` (commands and operations), ``pipelines`` (Esper
Pipelines' staged releases, whose target runs are commands; ``pipeline_book`` holds them);
:class:`Engine` below combines them and runs the clock.
"""

from __future__ import annotations

from esper_warehouse.simulator.dynamics.devices import DeviceChanges
from esper_warehouse.simulator.dynamics.pipelines import PipelineRuns
from esper_warehouse.simulator.dynamics.rates import (
    CAMPAIGNS_PER_DAY,
    CAMPAIGNS_PER_DAY_IDLE,
    COMMANDS_PER_1000,
    DARK_RATE,
    ENROLL_RATE,
    MIN_ACTIVITY_FLEET,
    MIN_ADMIN_FLEET,
    MISC_CHANGE_RATE,
    OPERATIONS_PER_1000,
    RELEASES_PER_DAY,
    REMOVE_RATE,
    RETURN_RATE,
    ROLLOUT_RATE,
)
from esper_warehouse.simulator.dynamics.rollouts import Rollouts
from esper_warehouse.simulator.fleet import DAY, HOUR


class Engine(DeviceChanges, Rollouts, PipelineRuns):
    """Moves a :class:`Fleet` forward in simulated time."""

    # -- main loop -----------------------------------------------------------------------

    def run_until(self, target: int) -> None:
        """Advance the fleet's clock to ``target`` (epoch seconds)."""
        f = self.f
        start = f.now
        while f.now < target:
            t0 = f.now
            t1 = min(target, (t0 // HOUR + 1) * HOUR)
            self._tick(t0, t1)
            f.now = t1
            if t1 % DAY == 0:
                self.check_in(t1)
                if self.on_midnight is not None:
                    self.on_midnight(t1)
        self.check_in(f.now)
        if self.after_run is not None and f.now > start:
            self.after_run(start, f.now)

    def _tick(self, t0: int, t1: int) -> None:
        dt = (t1 - t0) / DAY
        n_live = max(1, len(self.f.ids) - sum(self.f.removed)) if dt > 0 else 0
        scale = max(n_live, MIN_ACTIVITY_FLEET) if dt > 0 else 0
        self._fire_due(t1)
        rng = self.rng
        for _ in range(self._poisson(scale * MISC_CHANGE_RATE * dt)):
            self._misc_change(rng.randint(t0, t1 - 1))
        # what the running campaigns can take per day over the next three days
        capacity = sum(min(c.per_day, len(c.targets) / 3) for c in self.campaigns)
        per_day = CAMPAIGNS_PER_DAY if capacity >= scale * ROLLOUT_RATE else CAMPAIGNS_PER_DAY_IDLE
        if rng.random() < RELEASES_PER_DAY * dt:
            self._publish(rng.randint(t0, t1 - 1))
        if rng.random() < per_day * dt:
            ts = rng.randint(t0, t1 - 1)
            for _ in range(3):  # a region without eligible devices: try another release
                if self._start_campaign(ts):
                    break
        self._run_campaigns(t0, t1, dt, scale)
        admin = max(n_live, MIN_ADMIN_FLEET) / 1000 * dt
        for _ in range(self._poisson(admin * COMMANDS_PER_1000)):
            self._issue_command(rng.randint(t0, t1 - 1))
        for _ in range(self._poisson(admin * OPERATIONS_PER_1000)):
            self._issue_operation(rng.randint(t0, t1 - 1))
        for _ in range(self._poisson(n_live * ENROLL_RATE * dt)):
            self._enroll(rng.randint(t0, t1 - 1))
        for _ in range(self._poisson(n_live * REMOVE_RATE * dt)):
            self._remove()
        for _ in range(self._poisson(n_live * DARK_RATE * dt)):
            i = self._pick_live()
            if i >= 0:
                self.f.dark[i] = True
        for _ in range(self._poisson(n_live * RETURN_RATE * dt)):
            dark = [i for i in self._sample_live(20) if self.f.dark[i] and self.f.last_seen[i] >= 0]
            if dark:
                self.f.dark[dark[0]] = False
        self._fire_due(t1)

    def check_in(self, now: int) -> None:
        """Every reachable device reports a last-seen time within its check-in period.

        Check-ins move ``last_seen`` only: they are telemetry, not a change of the record.
        """
        f = self.f
        ls, dark, removed, period = f.last_seen, f.dark, f.removed, f.checkin
        for i in range(len(f.ids)):
            if dark[i] or removed[i] or ls[i] < 0:
                continue
            c = period[i]
            off = (i * 7919 + (now // c) * 104_729) % c
            if now - off > ls[i]:
                ls[i] = now - off
        f.version += 1
