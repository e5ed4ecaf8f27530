"""Group routes: the legacy device-group list and the v2 subgroups of a group."""

from __future__ import annotations

from esper_warehouse.simulator.http import LEGACY, ApiError, Req, check_uuid
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, legacy_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record
from esper_warehouse.sources.esper.tables.catalogues import GROUPS


def devicegroups(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/devicegroup/ (legacy envelope)."""
    counts = w.group_counts()
    items = list(range(len(w.fleet.groups)))
    name = req.query.get("name")
    if name:
        items = [g for g in items if name.lower() in w.fleet.groups[g].name.lower()]
    return 200, legacy_list(req, items, lambda g: w.wire.group(g, counts[g]))


def subgroups(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/subgroups?parent_group_ids (required)."""
    parents = req.csv_param("parent_group_ids")
    if parents is None:
        raise ApiError(400, "parent_group_ids is required")
    immediate = req.bool_param("immediate") or False
    by_id = {grp.id: k for k, grp in enumerate(w.fleet.groups)}
    out: list[str] = []
    for pid in parents:
        g = by_id.get(check_uuid(pid, "parent_group_ids"))
        if g is None:
            continue
        subs = w.fleet.groups[g].children if immediate else sorted(w.group_descendants(g) - {g})
        out.extend(w.fleet.groups[s].id for s in subs)
    return 200, {"content": {"subgroups": out}}


def truth_groups(w: World) -> list[Record]:
    """Every group with the count of devices directly in it."""
    counts = w.group_counts()
    return [w.wire.group(g, counts[g]) for g in range(len(w.fleet.groups))]


AREA = Area(
    routes=(
        Route("GET", "/v2/subgroups", LEGACY, subgroups),
        Route("GET", GROUPS.path, LEGACY, devicegroups),
    ),
    truth={"groups": truth_groups},
)
