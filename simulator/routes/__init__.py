"""The Esper API the simulator serves: every area module's routes and truth, collected.

Paths are relative to ``/api``; envelopes, parameter names and defaults follow the live evidence,
then the OpenAPI subset, path by path. Handlers run under the world lock (taken by the app).

One module per API area declares ``AREA = Area(routes=..., truth=...)`` (`routes/area.py`); its
docstring says what it serves, and ``AREAS`` holds the modules found (named here by no list, which
would go stale). A new module with an ``AREA`` is served and its tables have a truth, with no
other file to touch. A route a table's declaration names is read from it (``GROUPS.path``).
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
