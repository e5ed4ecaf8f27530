"""Geofences (`GET /v0/enterprise/{eid}/geofence/`, live route 24): where devices may be.

The area whole in one module: the records (shaped like the live answer: float `latitude` and
`longitude`, int `radius`, `device_actions` a list of strings), the route, its line in the route
table (`AREA`, collected by `routes/__init__.py`) and the truth the tests compare a load with.
"""

from __future__ import annotations

import random

from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.http import LEGACY, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, legacy_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.sources.esper.tables.catalogues import GEOFENCES

ACTIONS = ("LOCK", "BEEP", "NOTIFY")


def geofences(w: World) -> list[dict]:
    """Every geofence of the tenant: one per top-level site group, at least three."""
    count = max(3, len(w.fleet.groups) // 4)
    return [_geofence(w, k) for k in range(count)]


def _geofence(w: World, k: int) -> dict:
    rng = random.Random(f"{w.fleet.seed}:geofence:{k}")
    group = w.fleet.groups[k % len(w.fleet.groups)]
    return {
        "id": derived_id("geofence", w.fleet.seed, k),
        "name": f"Site {k + 1}",
        "description": f"Devices of {group.name} stay within {k + 1} km",
        "latitude": round(rng.uniform(-60, 60), 6),
        "longitude": round(rng.uniform(-180, 180), 6),
        "radius": 500 * (1 + k % 4),
        "radius_unit": "METERS",
        "device_actions": sorted(rng.sample(ACTIONS, 1 + k % 2)),
        "device_count": rng.randrange(0, 40),
        "enterprise": w.wire.enterprise_url(),
        "created_by": w.fleet.users[k % len(w.fleet.users)],
        "created_on": iso(group.created),
        "updated_on": iso(group.created + 86400 * (1 + k)),
    }


def geofence_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v0/enterprise/{eid}/geofence/ (legacy envelope: count, next, previous, results)."""
    items = geofences(w)
    return 200, legacy_list(req, list(range(len(items))), lambda k: items[k])


AREA = Area(
    routes=(Route("GET", GEOFENCES.path, LEGACY, geofence_list),),
    truth={"geofences": geofences},
)
