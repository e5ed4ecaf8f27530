"""A nightly's requests against its floor: what that day's changes need, per route.

The floor of a route (`floor`):
- a device's own reads: its installed apps (Android: the legacy route; Apple/Windows: v2) once
  for each device the day changed, by its apps route, and its event feed once for each device
  with activity that day (changed, or a command status or operation row that moved: each is a
  new event). The day is the warehouse's after the nightly: rows whose `updated_at` is past the
  full load's API time (`warehouse.changed_devices`).
- the one-device detail route: none (it is asked only for a device an earlier run was refused).
- the device list: the run's opening count, and the pages holding the devices the day changed
  (read newest first down to the watermark: `DEVICES.page_size` a page).
- every other route (the lists: tenant-level, and per parent, read whole or down to their
  watermark): what the nightly sent on it, at most one whole read of it (the full load's
  requests on that route). The lists count as needed: a change is found by reading them.

Above the floor are a device read more than once, a device read that the day's changes do not
need (a device re-listed within the lag, an activity already loaded), a list read more than
once, and the device list read whole again (to tell a removed device from a refused route,
`common.still_listed`, after a 404 on a device's feed or apps).
"""

from __future__ import annotations

import math
from typing import Any

from esper_warehouse.sources.esper.tables.devices import (
    DEVICE_APPS,
    DEVICE_DETAIL_PATH,
    DEVICES,
    V2_DEVICE_APPS_PATH,
)
from esper_warehouse.sources.esper.tables.events import DEVICE_EVENTS

DEVICE_LIST = f"GET {DEVICES.path}"
# route -> what one request on it is needed for (`day` keys of `warehouse.changed_devices`)
PER_DEVICE = {
    f"GET {DEVICE_APPS.path}": ("changed_apps", "legacy"),
    f"GET {V2_DEVICE_APPS_PATH}": ("changed_apps", "v2"),
    f"GET {DEVICE_EVENTS.path}": ("active", None),
    f"GET {DEVICE_DETAIL_PATH}": (None, None),
}


def floor(
    full: dict[str, int], nightly: dict[str, int], day: dict[str, Any]
) -> dict[str, dict[str, int]]:
    """Per route: the nightly's requests and its floor (module docstring)."""
    out: dict[str, dict[str, int]] = {}
    for route in sorted(set(nightly) | {r for r in PER_DEVICE if r in full}):
        sent = nightly.get(route, 0)
        if route == DEVICE_LIST:
            need = 1 + max(1, math.ceil(int(day.get("changed") or 0) / DEVICES.page_size))
        elif route in PER_DEVICE:
            key, part = PER_DEVICE[route]
            value = day.get(key) if key else 0
            need = int((value or {}).get(part, 0) if part else (value or 0))
        else:
            need = min(sent, full.get(route, sent))
        out[route] = {"nightly": sent, "floor": need}
    return out


def summary(scenario: dict[str, Any]) -> dict[str, Any] | None:
    """The nightly against its floor: totals, shares of the full load, the routes above it."""
    runs = scenario.get("runs", {})
    full, night = runs.get("pipeline_full", {}), runs.get("pipeline_nightly", {})
    day = night.get("changed_devices")
    if not (full.get("routes") and night.get("routes") and day and "changed_apps" in day):
        return None
    routes = floor(full["routes"], night["routes"], day)
    sent = sum(r["nightly"] for r in routes.values())
    need = sum(r["floor"] for r in routes.values())
    total = full.get("requests") or sum(full["routes"].values())
    above = {k: v for k, v in routes.items() if v["nightly"] != v["floor"]}
    return {
        "nightly": sent,
        "floor": need,
        "full": total,
        "nightly_share": sent / total if total else None,
        "floor_share": need / total if total else None,
        "above": dict(sorted(above.items(), key=lambda kv: kv[1]["floor"] - kv[1]["nightly"])),
        "routes": routes,
    }


def lines(scenario: dict[str, Any]) -> list[str]:
    """The README's lines on the nightly against its floor (none when not measured)."""
    s = summary(scenario)
    if s is None:
        return []
    day = scenario["runs"]["pipeline_nightly"]["changed_devices"]
    apps = day["changed_apps"]
    out = [
        f"- nightly against its floor (what the day's changes need: the lists, each changed "
        f"device's apps once ({apps.get('legacy', 0):,} Android, {apps.get('v2', 0):,} "
        f"Apple/Windows), each active device's event feed once ({day['active']:,}); "
        "bench/nightfloor.py): "
        f"**{s['nightly']:,}** requests against a floor of **{s['floor']:,}** "
        f"({_pct(s['nightly_share'])} and {_pct(s['floor_share'])} of the full load's "
        f"{s['full']:,})"
    ]
    for route, counts in list(s["above"].items())[:8]:
        out.append(f"  - `{route}`: {counts['nightly']:,} sent, floor {counts['floor']:,}")
    return out


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"
