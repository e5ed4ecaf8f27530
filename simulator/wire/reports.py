"""Report records: the status-metrics counters of the fleet (live route 23).

The constants are the simulator's definitions of the live counters (``status_metrics``).
"""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.wire.base import Record, WireBase

_DAY, _TVOS = 86_400, C.OS_NAMES.index("tvOS")  # tvOS devices report no battery
LOW_BATTERY = 15  # percent
LAST_SEEN_PERIODS = (3_600, 86_400, 7 * 86_400)  # first, second, third period (seconds)
UNDER_PROVISIONING = frozenset({30, 40, 50, 80})
_METRIC_COUNTERS = (
    "high_risk", "low_battery", "low_risk", "medium_risk", "recently_added", "secure",
    "total_devices_under_risk", "under_provisioning", "unprovisioned_devices", "unspecified",
)  # fmt: skip


class ReportRecords(WireBase):
    """Builder of the status-metrics report."""

    def status_metrics(self) -> Record:
        """GET /v2/enterprise/{eid}/report/status-metrics: a bare object of fleet counters.

        Live route 23 gives the shape (ints, plus ``last_seen`` with three periods), not the
        definitions; the simulator's, over the devices the API serves (not removed), are:
        ``recently_added`` provisioned in the last 7 days; ``low_battery`` battery below 15 %
        (of the devices that report a battery: not tvOS); ``last_seen`` periods: seen within the
        last hour, 24 hours, 7 days (each includes the shorter ones); ``under_provisioning``
        states 30, 40, 50 and 80; ``unprovisioned_devices`` never seen since enrolment; risk by
        Android patch age (months behind the newest patch level): ``secure`` 0-1, ``low_risk``
        2-3, ``medium_risk`` 4-5, ``high_risk`` 6 or more, ``total_devices_under_risk`` the
        three risks, ``unspecified`` devices without a patch level (not Android).
        """
        f, now = self.f, self.f.now
        newest = len(f.patch_levels) - 1
        n: Record = dict.fromkeys(_METRIC_COUNTERS, 0)
        periods = [0, 0, 0]
        for i in f.live():
            if now - 7 * _DAY <= f.provisioned[i] <= now:
                n["recently_added"] += 1
            if f.os[i] != _TVOS and f.battery[i] < LOW_BATTERY:
                n["low_battery"] += 1
            seen = f.last_seen[i]
            if seen < 0:
                n["unprovisioned_devices"] += 1
            else:
                for k, window in enumerate(LAST_SEEN_PERIODS):
                    periods[k] += now - window <= seen
            if f.state[i] in UNDER_PROVISIONING:
                n["under_provisioning"] += 1
            if f.patch[i] < 0:
                n["unspecified"] += 1
                continue
            behind = newest - f.patch[i]
            risk = "secure" if behind < 2 else "low_risk" if behind < 4 else "medium_risk"
            n["high_risk" if behind >= 6 else risk] += 1
        n["total_devices_under_risk"] = n["low_risk"] + n["medium_risk"] + n["high_risk"]
        names = ("first_period", "second_period", "third_period")
        n["last_seen"] = dict(zip(names, periods, strict=True))
        return n
