"""The Esper API the simulator serves: every area module's routes and truth, collected.

Paths are relative to ``/api``; envelopes, parameter names and defaults follow the live evidence,
then the OpenAPI subset, path by path. Handlers run under the world lock (taken by the app).

One module per API area declares ``AREA = Area(routes=..., truth=...)`` (`routes/area.py`):

- ``devices``: v2 and legacy devices, heartbeats, a device's event feed;
- ``groups`` and ``blueprints``: device groups and blueprints;
- ``apps``: tenant apps, the Android application catalogue, a device's installed apps;
- ``commands`` and ``operations``: commands with their statuses, operations with their parts;
- ``reports``: the status-metrics report and the Data Tap queries;
- ``geofences``, ``credentials``, ``access``: areas simulated whole, records included.

A new module with an ``AREA`` is served and its tables have a truth, with no other file to touch.
``envelopes`` holds the list and success envelopes and id lookups every area uses.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from esper_warehouse.simulator.routes.area import Area, Handler, Route, Truth

__all__ = ["AREAS", "ROUTES", "TRUTH", "Handler", "Route", "truth_tables"]


def _areas() -> Iterator[tuple[str, Area]]:
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        area = getattr(importlib.import_module(f"{__name__}.{module}"), "AREA", None)
        if area is not None:
            yield module, area


def _truth(areas: dict[str, Area]) -> dict[str, Truth]:
    out: dict[str, Truth] = {}
    for module, area in areas.items():
        for table, build in area.truth.items():
            if table in out:
                raise ValueError(f"the truth of {table!r} is declared twice (second: {module})")
            out[table] = build
    return out


AREAS: dict[str, Area] = dict(_areas())
ROUTES: tuple[Route, ...] = tuple(route for area in AREAS.values() for route in area.routes)
TRUTH: dict[str, Truth] = _truth(AREAS)


def truth_tables() -> tuple[str, ...]:
    """Every table ``sim.truth`` knows, in the order the areas declare them."""
    return tuple(TRUTH)
