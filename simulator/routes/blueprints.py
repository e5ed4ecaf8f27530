"""Blueprint routes: the v2 blueprint list, a blueprint and its versions."""

from __future__ import annotations

from typing import Any

from esper_warehouse.simulator.http import V2, ApiError, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, content_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record


def _blueprint(w: World, bid: str) -> int:
    for b, bp in enumerate(w.fleet.blueprints):
        if bp.id == bid.lower():
            return b
    raise ApiError(404, f"Blueprint {bid} not found")


def _sort_records(records: list[dict[str, Any]], ordering: str | None, allowed: set[str]) -> None:
    if not ordering:
        return
    for field in reversed(ordering.split(",")):
        name = field.strip().lstrip("-")
        if name not in allowed:
            raise ApiError(400, f"ordering: cannot order by {name!r}")
        records.sort(
            key=lambda r, n=name: (r[n] is None, r[n]), reverse=field.strip().startswith("-")
        )


def blueprints_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/blueprints/."""
    recs = [w.wire.blueprint(b) for b in range(len(w.fleet.blueprints))]
    if req.query.get("name"):
        recs = [r for r in recs if req.query["name"].lower() in r["name"].lower()]
    if req.query.get("name_exact"):
        recs = [r for r in recs if r["name"] == req.query["name_exact"]]
    _sort_records(recs, req.query.get("ordering"), {"name", "created_at", "updated_at"})
    return 200, {"content": content_list(req, recs, lambda r: r, "previous")}


def blueprint_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/blueprints/{id}/ (the schema allows no ``code`` but 201, so none is sent)."""
    return 200, {"content": w.wire.blueprint(_blueprint(w, req.params["id"])), "message": "Success"}


def blueprint_versions(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/blueprints/{id}/versions/."""
    b = _blueprint(w, req.params["id"])
    recs = [w.wire.blueprint(b, v) for v in range(len(w.fleet.blueprints[b].versions))]
    if req.query.get("version_number"):
        recs = [r for r in recs if str(r["version_number"]) == req.query["version_number"]]
    publish = req.bool_param("publish")
    if publish is not None:
        recs = [r for r in recs if r["publish"] == publish]
    allowed = {"version_number", "minor_version_number", "created_at", "updated_at"}
    _sort_records(recs, req.query.get("ordering"), allowed)
    return 200, {"content": content_list(req, recs, lambda r: r, "previous")}


def truth_blueprints(w: World) -> list[Record]:
    """Every blueprint at its latest version."""
    return [w.wire.blueprint(b) for b in range(len(w.fleet.blueprints))]


def truth_blueprint_versions(w: World) -> list[Record]:
    """Every version of every blueprint."""
    f = w.fleet
    return [
        w.wire.blueprint(b, v)
        for b in range(len(f.blueprints))
        for v in range(len(f.blueprints[b].versions))
    ]


AREA = Area(
    routes=(
        Route("GET", "/v2/blueprints/", V2, blueprints_list),
        Route("GET", "/v2/blueprints/{id}/", V2, blueprint_detail),
        Route("GET", "/v2/blueprints/{id}/versions/", V2, blueprint_versions),
    ),
    truth={"blueprints": truth_blueprints, "blueprint_versions": truth_blueprint_versions},
)
