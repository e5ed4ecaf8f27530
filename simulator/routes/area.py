"""What one module of `simulator/routes/` declares: its routes and the truth of its tables.

Each area module ends with ``AREA = Area(routes=(...), truth={...})``; `routes/__init__.py`
collects every module's ``AREA`` into the route table and the truth registry, so a route and the
truth of the table it feeds are written side by side, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from esper_warehouse.simulator.http import Req
    from esper_warehouse.simulator.routes.envelopes import Body
    from esper_warehouse.simulator.state import World
    from esper_warehouse.simulator.wire.base import Record

Handler = Callable[["World", "Req"], tuple[int, "Body"]]
Truth = Callable[["World"], "list[Record]"]


class Route(NamedTuple):
    """One line of the route table.

    Attributes:
        method: HTTP method.
        path: path template after ``/api``; ``{eid}`` is checked by the app (404 for another
            enterprise), other ``{name}`` parts reach the handler as ``req.params[name]``.
        family: error-body family of the path (``LEGACY``, ``V2``, ``REPORTS``).
        handler: ``(world, req) -> (status, body)``.
    """

    method: str
    path: str
    family: str
    handler: Handler


@dataclass(frozen=True)
class Area:
    """An API area: its routes and, for each table they feed, what the API serves now.

    Attributes:
        routes: the area's lines of the route table.
        truth: table name -> the records the API serves now for it (``sim.truth(table)``),
            built from the same wire builders as the routes so the two cannot disagree.
    """

    routes: tuple[Route, ...]
    truth: Mapping[str, Truth] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for route in self.routes:
            if not isinstance(route, Route):
                raise TypeError(f"{route!r} is not a Route")

    def describe(self) -> dict[str, Any]:
        """The area as text, for error messages."""
        return {"routes": [f"{r.method} {r.path}" for r in self.routes], "truth": list(self.truth)}
