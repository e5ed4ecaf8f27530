"""Device changes: settings and app changes, enrolments and removals of single devices."""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.dynamics.base import EngineBase
from esper_warehouse.simulator.fleet import HOUR


class DeviceChanges(EngineBase):
    """Changes to one device at a time (the ``MISC_CHANGE_RATE`` and enrolment rates)."""

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
