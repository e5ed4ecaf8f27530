"""Rollouts: releases (OS, patch, app and blueprint versions) and the campaigns that deliver
them region by region, in working hours, with some devices failing and staying behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.dynamics.base import EngineBase
from esper_warehouse.simulator.dynamics.rates import CAMPAIGN_WAVE_PER_DAY, ROLLOUT_RATE
from esper_warehouse.simulator.fleet import DAY, HOUR


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


class Rollouts(EngineBase):
    """Publishing releases and running their campaigns."""

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
