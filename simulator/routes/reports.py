"""Reports routes: the status-metrics report and the Data Tap queries (the Reports family).

The Data Tap handlers parse and check the request; the queries themselves run in
:class:`~esper_warehouse.simulator.datatap.DataTap` (``world.datatap``).
"""

from __future__ import annotations

import orjson
from esper_warehouse.simulator.http import REPORTS, V2, ApiError, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record

DEFAULT_ROW_LIMIT = 10_000
MAX_ROW_LIMIT = 100_000


def status_metrics(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/enterprise/{eid}/report/status-metrics: a bare object (live route 23)."""
    return 200, w.wire.status_metrics()


def datatap_create(w: World, req: Req) -> tuple[int, Body]:
    """POST /data-tap/v0/queries."""
    w.datatap.spend()
    try:
        body = orjson.loads(req.body or b"{}")
    except orjson.JSONDecodeError:
        raise ApiError(400, "request body must be JSON") from None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("query"), str)
        or not body["query"].strip()
    ):
        raise ApiError(400, "query: a non-empty SQL string is required")
    row_limit = body.get("row_limit", DEFAULT_ROW_LIMIT)
    if row_limit is None:
        row_limit = DEFAULT_ROW_LIMIT
    if not isinstance(row_limit, int) or isinstance(row_limit, bool) or row_limit < 1:
        raise ApiError(400, "row_limit: a positive integer is required")
    latest = bool(body.get("latest_data", False))
    job = w.datatap.submit(body["query"], min(row_limit, MAX_ROW_LIMIT), latest)
    return 201, {"content": w.datatap.record(job)}


def datatap_get(w: World, req: Req) -> tuple[int, Body]:
    """GET /data-tap/v0/queries/{id}."""
    w.datatap.spend()
    job = w.datatap.jobs.get(req.params["id"].lower())
    if job is None:
        raise ApiError(404, f"Query {req.params['id']} not found")
    return 200, {"content": w.datatap.view(job)}


def truth_status_metrics(w: World) -> list[Record]:
    """One object: the counters as of now."""
    return [w.wire.status_metrics()]


AREA = Area(
    routes=(
        Route("GET", "/v2/enterprise/{eid}/report/status-metrics", V2, status_metrics),
        Route("POST", "/data-tap/v0/queries", REPORTS, datatap_create),
        Route("GET", "/data-tap/v0/queries/{id}", REPORTS, datatap_get),
    ),
    truth={"status_metrics": truth_status_metrics},
)
