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
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import (
    DAY,
    HOUR,
    CommandRequest,
    CommandStatus,
    Fleet,
    Operation,
    OperationDevice,
    new_id,
)

HISTORY_DAYS = 30  # the generated fleet already has this much history before `start`

# Rates per simulated day (fractions of the live fleet unless noted).
MISC_CHANGE_RATE = 0.008
# Rollouts: the tenant's update service delivers to about this share of the fleet per day (in
# working hours), shared by the running campaigns; each campaign also reaches at most
# CAMPAIGN_WAVE_PER_DAY of its own targets per day. A release reaches every eligible device
# (5 to 25 % of the fleet) region by region, one campaign per region, over days to weeks.
ROLLOUT_RATE = 0.016  # deliveries attempted; dark, failed and removed targets change nothing
CAMPAIGN_WAVE_PER_DAY = 0.3  # share of a campaign's targets reached per day, at most
RELEASES_PER_DAY = 0.35  # new OS/patch targets, app and blueprint versions (any fleet size)
CAMPAIGNS_PER_DAY = 0.2  # new campaigns per day while the running ones can use the capacity
CAMPAIGNS_PER_DAY_IDLE = 4.0  # ... and while they cannot (too few targets left for 3 days)
MIN_ACTIVITY_FLEET = 150  # device changes and rollouts: rates on at least this many devices
# Commands and operations: per 1,000 live devices, and at least as many as a 4,000-device fleet
# gets (a small test fleet still sees a command most days). A command reaches ~45 devices on
# average (~85 at 100,000 devices, where a store group is larger), so together with the status
# changes of the days after, they touch ~1.5-3 % of the fleet a day, on top of the ~2 % changed.
COMMANDS_PER_1000 = 0.25
OPERATIONS_PER_1000 = 0.1
MIN_ADMIN_FLEET = 4000
ENROLL_RATE = 0.001
REMOVE_RATE = 0.0005
DARK_RATE = 0.002
RETURN_RATE = 0.001


@dataclass(slots=True)
class Campaign:
    """A rollout moving ``targets`` (device indexes) to a new OS, app or blueprint version."""

    kind: str  # "os", "patch", "app", "blueprint"
    targets: list[int]
    per_day: float
    fail_rate: float
    ref: int = 0  # app index or blueprint index
    version: int = 0  # app version index or blueprint global version index
    failed: list[int] = field(default_factory=list)


class Engine:
    """Moves a :class:`Fleet` forward in simulated time."""

    def __init__(self, fleet: Fleet, seed: int) -> None:
        self.f = fleet
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

    # -- helpers -------------------------------------------------------------------------

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

    def _schedule(self, ts: int, kind: str, idx: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (ts, self.seq, kind, idx))

    def _fire_due(self, t1: int) -> None:
        while self.heap and self.heap[0][0] < t1:
            _ts, _seq, kind, idx = heapq.heappop(self.heap)
            if kind == "status":
                self._step_status(idx)
            elif kind == "opdev":
                self._step_op_device(idx)
            else:
                self._step_operation(idx)

    # -- device changes ------------------------------------------------------------------

    def _misc_change(self, ts: int) -> None:
        f, rng = self.f, self.rng
        i = self._pick_live()
        if i < 0:
            return
        r = rng.random()
        plat = f.platform(i)
        if r < 0.35:
            f.battery[i] = rng.randint(5, 100)
        elif r < 0.5:
            f.tags[i] = tuple(sorted(rng.sample(C.TAGS, rng.choice((0, 1, 2)))))
        elif r < 0.6:
            f.alias[i] = f"{C.OS_NAMES[f.os[i]]}-{rng.randrange(10**6):06d}"
        elif r < 0.7:
            self._members_of(f.group[i]).discard(i)
            f.group[i] = rng.choice(f.leaf_groups)
            self._members_of(f.group[i]).add(i)
        elif r < 0.78:
            f.state[i] = C.STATE_ACTIVE if f.state[i] != C.STATE_ACTIVE else C.STATE_DISABLED
            f.touch(i, ts, C.EV_STATE, f.state[i])
            return
        elif r < 0.86 and f.agent[i] < len(C.AGENTS[plat]) - 1:
            f.agent[i] += 1
        elif r < 0.93 and plat == C.ANDROID and len(f.apps[i]) > 4:
            k = rng.randrange(3, len(f.apps[i]))  # never the base apps
            app = f.apps[i].pop(k)
            f.touch(i, ts, C.EV_APP_REMOVED, app[0], app[1])
            return
        elif plat in (C.ANDROID, C.APPLE, C.WINDOWS):
            self._install_app(i, ts)
            return
        f.touch(i, ts)

    def _install_app(self, i: int, ts: int) -> None:
        f = self.f
        plat = f.platform(i)
        cat = f.legacy_apps if plat == C.ANDROID else f.tenant_apps
        have = {a[0] for a in f.apps[i]}
        pool = [k for k, a in enumerate(cat) if k not in have and a.platform == plat]
        if not pool:
            f.touch(i, ts)
            return
        k = self.rng.choice(pool)
        v = len(cat[k].versions) - 1
        f.apps[i].append((k, v, ts, ts))
        f.apps[i].sort()
        f.touch(i, ts, C.EV_APP_INSTALLED, k, v)

    def _enroll(self, ts: int) -> None:
        i = self.f.add_device(self.rng, ts - HOUR, not_after=ts - 1)
        self.f.touch(i, ts, C.EV_ENROLLED)

    def enroll_now(self, count: int) -> list[int]:
        """Enroll ``count`` devices at the current simulated time (used by paging faults)."""
        out = []
        for _ in range(count):
            now = self.f.now
            i = self.f.add_device(self.rng, now - HOUR, not_after=now - 1)
            self.f.touch(i, now, C.EV_ENROLLED)
            out.append(i)
        return out

    def _remove(self) -> None:
        i = self._pick_live(reachable=False)
        if i >= 0:
            self.f.removed[i] = True
            self.f.version += 1

    # -- rollouts ------------------------------------------------------------------------

    def _start_campaign(self, ts: int) -> bool:
        """Start a rollout wave: the next region of a release in progress, or a new release.

        A release (a new OS or patch level to reach, a new app or blueprint version) is rolled
        out region by region (the groups under one region group), one campaign per region.
        Releases are published at their own pace (``RELEASES_PER_DAY``, see :meth:`_publish`);
        campaigns start when the delivery capacity is free. Returns whether it has targets.
        """
        f, rng = self.f, self.rng
        live = [i for i in range(len(f.ids)) if not f.removed[i]]
        pending = [key for key, (_v, regions) in self.releases.items() if regions]
        if pending:
            kind, ref, plat = key = rng.choice(pending)
        else:
            kind, ref, plat = key = self._publish(ts, live)
        version, regions = self.releases[key]
        region = regions.pop()
        groups = f.groups
        live = [i for i in live if f.group[i] != C.NO_GROUP and groups[f.group[i]].parent == region]
        if kind == "os":
            top = len(C.OS_VERSIONS[ref]) - 1
            targets = [i for i in live if f.os[i] == ref and f.osv[i] < top]
            camp = Campaign("os", targets, CAMPAIGN_WAVE_PER_DAY, 0.05, ref=ref)
        elif kind == "patch":
            last = len(f.patch_levels) - 1
            targets = [i for i in live if f.os[i] == 0 and f.patch[i] < last]
            camp = Campaign("patch", targets, CAMPAIGN_WAVE_PER_DAY, 0.05, ref=ref)
        elif kind == "app":
            targets = [
                i for i in live if f.platform(i) == plat and any(a[0] == ref for a in f.apps[i])
            ]
            camp = Campaign("app", targets, CAMPAIGN_WAVE_PER_DAY, 0.05, ref=ref, version=version)
        else:
            targets = [i for i in live if f.bp_current[i] == ref]
            camp = Campaign("blueprint", targets, CAMPAIGN_WAVE_PER_DAY, 0.08, ref=ref)
            camp.version = version
        if not camp.targets:
            return False
        rng.shuffle(camp.targets)
        camp.per_day = max(1.0, len(camp.targets) * camp.per_day)
        self.campaigns.append(camp)
        return True

    def _publish(self, ts: int, live: list[int] | None = None) -> tuple[str, int, int]:
        """Publish a release (its app or blueprint version), every region still to be reached.

        Returns its key; it supersedes the regions not yet started of an older release of the
        same OS, app or blueprint.
        """
        f, rng = self.f, self.rng
        if live is None:
            live = [i for i in range(len(f.ids)) if not f.removed[i]]
        kind, ref, plat, version = self._new_release(ts, live)
        regions = sorted({f.groups[g].parent for g in f.leaf_groups})
        rng.shuffle(regions)
        self.releases[kind, ref, plat] = (version, regions)
        return kind, ref, plat

    def _new_release(self, ts: int, live: list[int]) -> tuple[str, int, int, int]:
        """Pick what a new release updates (kind, ref, platform, version); publish the version."""
        f, rng = self.f, self.rng
        kind = rng.choice(("os", "patch", "app", "app", "blueprint"))
        if kind in ("os", "patch"):
            os_ = rng.choice([f.os[i] for i in rng.sample(live, min(50, len(live)))])
            if kind == "patch" and os_ != 0:
                kind = "os"
            return kind, (os_ if kind == "os" else 0), -1, 0
        if kind == "app":
            plat = rng.choice((C.ANDROID, C.ANDROID, C.APPLE, C.WINDOWS))
            cat = f.legacy_apps if plat == C.ANDROID else f.tenant_apps
            # apps on more devices get more releases (as the browser and Play services do)
            installs = [0] * len(cat)
            for i in rng.sample(live, min(200, len(live))):
                if f.platform(i) == plat:
                    for a in f.apps[i]:
                        installs[a[0]] += 1
            ks = [k for k, a in enumerate(cat) if a.platform == plat]
            k = rng.choices(ks, weights=[1 + installs[k] for k in ks])[0]
            return "app", k, plat, f.add_app_version(cat[k], ts, rng)
        b = rng.randrange(len(f.blueprints))
        return "blueprint", b, -1, f.add_blueprint_version(b, ts, rng)

    def _run_campaigns(self, t0: int, t1: int, dt: float, scale: int) -> None:
        """Deliver this tick's share of the fleet-wide rollout capacity to the campaigns.

        Waves reach devices in the working hours of the day (08:00-20:00). The capacity
        (``ROLLOUT_RATE`` of the fleet per day) is paced evenly, with fractions carried to the
        next tick, and handed out one delivery at a time to the campaigns in turn, each
        taking at most its own wave (``CAMPAIGN_WAVE_PER_DAY`` of its targets per day).
        """
        f, rng = self.f, self.rng
        hour = (t0 % DAY) // HOUR
        if 8 <= hour < 20 and self.campaigns:
            self.rollout_carry += scale * ROLLOUT_RATE * dt * 2
            budget = int(self.rollout_carry)
            self.rollout_carry -= budget
            wants = [min(self._poisson(c.per_day * dt * 2), len(c.targets)) for c in self.campaigns]
            while budget > 0 and any(wants):
                for k, camp in enumerate(self.campaigns):
                    if budget <= 0 or wants[k] <= 0:
                        continue
                    wants[k] -= 1
                    budget -= 1
                    i = camp.targets.pop()
                    if f.removed[i]:
                        continue
                    if f.dark[i] or f.last_seen[i] < 0:
                        continue  # unreachable: stays behind
                    ts = rng.randint(t0, t1 - 1)
                    fail = rng.random() < camp.fail_rate
                    self._apply(camp, i, ts, fail)
        self.campaigns = [c for c in self.campaigns if c.targets]

    def _apply(self, camp: Campaign, i: int, ts: int, fail: bool) -> None:
        f = self.f
        if camp.kind == "os":
            if fail:
                return  # the update did not install; the device stays on its version
            if f.osv[i] < len(C.OS_VERSIONS[f.os[i]]) - 1:
                f.osv[i] += 1
                if f.os[i] == 0:
                    f.patch[i] = max(f.patch[i], len(f.patch_levels) - 3)
                f.touch(i, ts, C.EV_OS_UPDATED, f.osv[i])
        elif camp.kind == "patch":
            if not fail:
                f.patch[i] = len(f.patch_levels) - 1
                f.touch(i, ts, C.EV_OS_UPDATED, f.osv[i])
        elif camp.kind == "app":
            apps = f.apps[i]
            for k, (a, v, created, _u) in enumerate(apps):
                if a == camp.ref and v < camp.version and not fail:
                    apps[k] = (a, camp.version, created, ts)
                    f.touch(i, ts, C.EV_APP_UPDATED, a, camp.version)
        else:
            plat = f.platform(i)
            if f.bp_current[i] != camp.ref:
                return
            if plat in (C.WINDOWS, C.LINUX):
                f.bp_ver[i] = camp.version
            elif fail:
                f.bp_status[i] = C.UPGRADE_FAILED
            else:
                f.bp_ver[i] = camp.version
                f.bp_status[i] = C.UPGRADED
            f.touch(i, ts, C.EV_BLUEPRINT, 0, f.bp_status[i])

    # -- commands ------------------------------------------------------------------------

    def _target_size(self) -> int:
        """A few to a few hundred devices, at most 2 % of the fleet (5 on a tiny one)."""
        r = self.rng.random()
        if r < 0.5:
            n = self.rng.randint(1, 5)
        elif r < 0.85:
            n = self.rng.randint(10, 60)
        else:
            n = self.rng.randint(100, 300)
        return max(1, min(n, max(5, len(self.f.ids) // 50)))

    def _issue_command(self, ts: int) -> None:
        f, rng = self.f, self.rng
        group = -1
        if rng.random() < 0.2:
            group = rng.choice(f.leaf_groups)
            devices = sorted(i for i in self._members_of(group) if not f.removed[i])
        else:
            devices = sorted(set(self._sample_live(self._target_size())))
        if not devices:
            return
        schedule = "WINDOW" if rng.random() < 0.15 else "IMMEDIATE"
        r = len(f.commands)
        req = CommandRequest(
            new_id(rng),
            rng.randrange(len(C.COMMANDS)),
            devices,
            group,
            schedule,
            ts,
            rng.choice(f.users),
        )
        f.commands.append(req)
        f.command_index[req.id] = r
        for d in devices:
            s = len(f.statuses)
            first = C.CMD_SCHEDULED if schedule == "WINDOW" else C.CMD_QUEUED
            st = CommandStatus(
                new_id(rng), r, d, first, ts, ts, plan=self._status_plan(d, ts, first)
            )
            f.statuses.append(st)
            f.status_index[st.id] = s
            req.statuses.append(s)
            f.add_event(d, ts, C.EV_COMMAND, req.command, first)
            self._schedule(st.plan[0][0], "status", s)

    def _status_plan(self, d: int, ts: int, first: int) -> list[tuple[int, int]]:
        """The future (time, state) path of a new status, legal step by legal step."""
        f, rng = self.f, self.rng
        plan: list[tuple[int, int]] = []
        t = ts
        if first == C.CMD_SCHEDULED:
            t += rng.randint(2 * HOUR, 24 * HOUR)
            if rng.random() < 0.15:
                return [(t, C.CMD_CANCELLED)]
            plan.append((t, C.CMD_QUEUED))
        if f.dark[d] or f.last_seen[d] < 0:
            return [*plan, (t + 48 * HOUR, C.CMD_TIMEOUT)]
        r = rng.random()
        if r < 0.02:
            return [*plan, (t + rng.randint(HOUR, 12 * HOUR), C.CMD_CANCELLED)]
        t += rng.randint(30, 4 * HOUR)
        plan.append((t, C.CMD_INITIATED))
        t += rng.randint(5, 120)
        plan.append((t, C.CMD_ACKNOWLEDGED))
        if r < 0.05:
            return [*plan, (t + 24 * HOUR, C.CMD_TIMEOUT)]
        t += rng.randint(5, 300)
        plan.append((t, C.CMD_IN_PROGRESS))
        t += rng.randint(10, 2 * HOUR)
        plan.append((t, C.CMD_FAILURE if r < 0.12 else C.CMD_SUCCESS))
        return plan

    def _step_status(self, s: int) -> None:
        f = self.f
        st = f.statuses[s]
        ts, state = st.plan.pop(0)
        st.state = state
        st.updated = ts
        if state == C.CMD_FAILURE:
            st.reason = "Command failed on device"
        elif state == C.CMD_TIMEOUT:
            st.reason = "Device did not respond in time"
        elif state == C.CMD_CANCELLED:
            st.reason = "Cancelled"
        req = f.commands[st.request]
        if not f.removed[st.device]:
            f.add_event(st.device, ts, C.EV_COMMAND, req.command, state)
        if st.plan:
            self._schedule(st.plan[0][0], "status", s)

    # -- operations ----------------------------------------------------------------------

    def _issue_operation(self, ts: int) -> None:
        f, rng = self.f, self.rng
        devices = sorted(set(self._sample_live(self._target_size())))
        if not devices:
            return
        o = len(f.operations)
        op = Operation(
            new_id(rng), f"converge-{o + 1}", C.OP_CREATED, ts, ts, rng.choice(f.users), devices
        )
        op.activity.append(("CREATED", ts))
        f.operations.append(op)
        f.operation_index[op.id] = o
        t = ts + rng.randint(5, 60)
        op.plan = [(t, C.OP_RESOLVING)]
        t += rng.randint(10, 120)
        op.plan.append((t, C.OP_RESOLVED))
        t += rng.randint(10, 60)
        op.plan.append((t, C.OP_DISPATCHING))
        dispatch = t
        last = t
        n_failed = 0
        for d in devices:
            p = len(f.op_devices)
            od = OperationDevice(new_id(rng), o, d, C.OPD_CREATED, dispatch, dispatch)
            od.activity.append(("CREATED", dispatch))
            ti = dispatch + rng.randint(1, 30)
            if f.dark[d] or f.last_seen[d] < 0:
                tf, final = dispatch + 24 * HOUR, C.OPD_FAILED
            else:
                tf = ti + rng.randint(60, 6 * HOUR)
                final = C.OPD_FAILED if rng.random() < 0.08 else C.OPD_SUCCEEDED
            n_failed += final == C.OPD_FAILED
            od.plan = [(ti, C.OPD_INITIATED), (tf, final)]
            last = max(last, tf)
            f.op_devices.append(od)
            op.parts.append(p)
        final_op = C.OP_FAILED if n_failed == len(devices) else C.OP_COMPLETED
        op.plan.append((last + rng.randint(1, 60), final_op))
        self._schedule(op.plan[0][0], "op", o)

    def _step_operation(self, o: int) -> None:
        f = self.f
        op = f.operations[o]
        ts, state = op.plan.pop(0)
        op.state = state
        op.updated = max(op.updated, ts)
        op.activity.extend((name, ts) for name in C.OPERATION_ACTIVITY[state])
        if state == C.OP_DISPATCHING:
            for p in op.parts:
                od = f.op_devices[p]
                od.updated = max(od.updated, ts)
                self._schedule(od.plan[0][0], "opdev", p)
        if op.plan:
            self._schedule(op.plan[0][0], "op", o)

    def _step_op_device(self, p: int) -> None:
        f = self.f
        od = f.op_devices[p]
        ts, state = od.plan.pop(0)
        od.state = state
        od.updated = ts
        od.activity.append((C.OP_DEVICE_STATES[state], ts))
        if state == C.OPD_FAILED:
            od.reason = "Device did not converge"
        op = f.operations[od.operation]
        op.updated = max(op.updated, ts)  # operation_stats changed
        if not f.removed[od.device]:
            f.add_event(od.device, ts, C.EV_OPERATION, 0, state)
        if od.plan:
            self._schedule(od.plan[0][0], "opdev", p)
