"""Esper Pipelines (`/pipelines/v0/`): pipelines, their stages' operations and targets, runs,
stage runs and target runs, as the spec (docs/spec/esper-pipelines-v0-subset.json) shapes them.

Every list is the spec's `apps-envelope`: ``{code, message, content: {count, next, previous,
results}}``, paged by ``limit`` (default 20, at most 1000) and ``offset`` with absolute links, as
the v0 services' lists are (the spec declares no paging parameters on these routes). Query
parameters are the spec's; a value outside its enum, or a malformed UUID where the spec says
``format: uuid``, answers 400; an unknown id answers 404. Without an order asked for, runs are
listed newest first, stages and stage runs in their order, target runs as created.

A key without the ``read:pipeline`` scope: refuse the routes with the simulator's faults
(``{"kind": "status", "status": 403, "route": "/pipelines/*"}``), as for the other scoped areas.
The life of the runs is the clock's (`simulator/dynamics/pipelines.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from esper_warehouse.simulator.dynamics.pipeline_book import target_state
from esper_warehouse.simulator.http import V2, ApiError, Req, check_uuid
from esper_warehouse.simulator.routes import pipeline_records as P
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, content_list, ok
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record
from esper_warehouse.sources.esper.tables.pipelines import PIPELINE_RUNS, PIPELINES

RUN_STATUSES = ("pending", "queued", "processing", "running", "waiting", "complete", "success",
                "failure", "cancelled", "invalid", "timeout")  # fmt: skip
STAGE_RUN_STATUSES = tuple(s for s in RUN_STATUSES if s != "waiting")
TARGET_RUN_STATUSES = (*STAGE_RUN_STATUSES[:3], "dispatched", *STAGE_RUN_STATUSES[3:])


def _page(req: Req, items: list[int], build: Callable[[int], Record]) -> tuple[int, Body]:
    return 200, ok(content_list(req, items, build, "previous"))


def _find(w: World, kind: str, key: str, what: str) -> int:
    i = P.book(w).find(kind, key)
    if i is None:
        raise ApiError(404, f"{what} {key} not found")
    return i


def _choice(req: Req, name: str, allowed: tuple[str, ...]) -> str | None:
    value = req.query.get(name)
    if value is None or value == "":
        return None
    if value not in allowed:
        raise ApiError(400, f"{name}: must be one of {', '.join(allowed)}")
    return value


def _order(items: list[int], ordering: str | None, keys: dict[str, Callable[[int], Any]]) -> None:
    """Sort ``items`` by an ``ordering`` of the spec's enum (unset values first, ties by id)."""
    if ordering is None:
        return
    key = keys[ordering.lstrip("-")]
    items.sort(key=lambda i: (key(i) is not None, key(i) or 0), reverse=ordering[0] == "-")


# -- pipelines and their stages -----------------------------------------------------------


def pipelines_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/ (``default``, ``name`` contains, ``ordering`` by name)."""
    b = P.book(w)
    items = list(range(len(b.pipelines)))
    if req.bool_param("default") is True:
        items = []  # no pipeline of the tenant is its default one
    name = (req.query.get("name") or "").lower()
    items = [p for p in items if name in b.pipelines[p].name.lower()]
    ordering = _choice(req, "ordering", ("name", "-name"))
    _order(items, ordering, {"name": lambda p: b.pipelines[p].name})
    return _page(req, items, lambda p: P.pipeline(w, p))


def pipeline_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/{pipeline_id}/."""
    return 200, ok(P.pipeline(w, _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")))


def stages_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/{pipeline_id}/stages/ (in the stages' order)."""
    p = _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")
    return _page(req, list(P.book(w).pipelines[p].stages), lambda s: P.stage(w, s))


def _stage_of(w: World, req: Req) -> int:
    return _find(w, "stages", req.params["stage_id"], "Stage")


def stage_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/{pipeline_id}/stages/{stage_id}/."""
    p = _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")
    s = _stage_of(w, req)
    if P.book(w).stages[s].pipeline != p:
        raise ApiError(404, f"Stage {req.params['stage_id']} not found")
    return 200, ok(P.stage(w, s))


def stage_operation_lists(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/stages/{stage_id}/operationlists/: the stage's one list."""
    s = _stage_of(w, req)
    return _page(req, [s], lambda k: P.operation_list(w, k))


def operations_of_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/operationlists/{operationlist_id}/operations/ (``operation_type``)."""
    key = req.params["operationlist_id"].lower()
    b = P.book(w)
    s = next((k for k, x in enumerate(b.stages) if P.list_ids(x)[0] == key), None)
    if s is None:
        raise ApiError(404, f"Operation list {key} not found")
    wanted = req.query.get("operation_type")
    command = b.pipelines[b.stages[s].pipeline].command
    return _page(req, [s] if wanted in (None, "", command) else [], lambda k: P.operation(w, k))


def stage_target_lists(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/stages/{stage_id}/targetlists/ (``type``: groups, devices, collections)."""
    check_uuid(req.params["stage_id"], "stage_id")
    s = _stage_of(w, req)
    kind = _choice(req, "type", ("groups", "devices", "collections"))
    actual = "groups" if P.book(w).stages[s].groups else "devices"
    return _page(req, [s] if kind in (None, actual) else [], lambda k: P.target_list(w, k))


def _target_list(w: World, req: Req) -> int:
    p = _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")
    key = req.params["targetlist_id"].lower()
    for s in P.book(w).pipelines[p].stages:
        if P.list_ids(P.book(w).stages[s])[2] == key:
            return s
    raise ApiError(404, f"Target list {key} not found")


def targets_of_list(w: World, req: Req) -> tuple[int, Body]:
    """GET .../targetlists/{targetlist_id}/targets/: a DEVICES list's devices."""
    s = _target_list(w, req)
    devices = P.book(w).stages[s].devices
    return _page(req, list(devices), lambda d: P.target(w, s, d))


def groups_of_list(w: World, req: Req) -> tuple[int, Body]:
    """GET .../targetlists/{targetlist_id}/devicegroups/: a GROUPS list's groups."""
    s = _target_list(w, req)
    return _page(req, list(P.book(w).stages[s].groups), lambda g: P.target_group(w, s, g))


# -- runs -------------------------------------------------------------------------------


def _runs(w: World, req: Req, items: list[int], by_name: bool) -> tuple[int, Body]:
    b = P.book(w)
    runs = b.runs
    status = _choice(req, "status", RUN_STATUSES)
    if status is not None:
        items = [r for r in items if runs[r].status == status]
    orderings = ["run_number", "status", "started_at", "ended_at"]
    if by_name:
        orderings.insert(2, "pipeline__name")
        name = (req.query.get("pipeline_name") or "").lower()
        items = [r for r in items if name in b.pipelines[runs[r].pipeline].name.lower()]
    ordering = _choice(req, "ordering", tuple(o for n in orderings for o in (n, f"-{n}")))
    items.sort(key=lambda r: (-runs[r].created, runs[r].id))
    _order(items, ordering, {
        "run_number": lambda r: runs[r].number,
        "status": lambda r: runs[r].status,
        "pipeline__name": lambda r: b.pipelines[runs[r].pipeline].name,
        "started_at": lambda r: runs[r].started,
        "ended_at": lambda r: runs[r].ended,
    })  # fmt: skip
    return _page(req, items, lambda r: P.run(w, r))


def runs_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/runs/: every run of the tenant (``status``, ``pipeline_name``,
    ``ordering``); newest first unless ordered."""
    return _runs(w, req, list(range(len(P.book(w).runs))), by_name=True)


def pipeline_runs(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/{pipeline_id}/runs/ (``status``, ``ordering``)."""
    p = _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")
    return _runs(w, req, list(P.book(w).pipelines[p].runs), by_name=False)


def run_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/pipelines/{pipeline_id}/runs/{pipeline_run_id}/."""
    p = _find(w, "pipelines", req.params["pipeline_id"], "Pipeline")
    r = _find(w, "runs", req.params["pipeline_run_id"], "Pipeline run")
    if P.book(w).runs[r].pipeline != p:
        raise ApiError(404, f"Pipeline run {req.params['pipeline_run_id']} not found")
    return 200, ok(P.run(w, r))


def stage_runs(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/runs/{pipeline_run_id}/stageruns/ (``status``), in stage order."""
    b = P.book(w)
    r = _find(w, "runs", req.params["pipeline_run_id"], "Pipeline run")
    status = _choice(req, "status", STAGE_RUN_STATUSES)
    items = [s for s in b.runs[r].stage_runs if status in (None, b.stage_runs[s].status)]
    return _page(req, items, lambda s: P.stage_run(w, s))


def _stage_run(w: World, req: Req) -> int:
    return _find(w, "stage_runs", req.params["stage_run_id"], "Stage run")


def stage_run_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/runs/{pipeline_run_id}/stageruns/{stage_run_id}/."""
    r = _find(w, "runs", req.params["pipeline_run_id"], "Pipeline run")
    s = _stage_run(w, req)
    if P.book(w).stage_runs[s].run != r:
        raise ApiError(404, f"Stage run {req.params['stage_run_id']} not found")
    return 200, ok(P.stage_run(w, s))


def stage_run_operations(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/stageruns/{stage_run_id}/operations/: the stage run's operation."""
    s = _stage_run(w, req)
    return _page(req, [s], lambda k: P.stage_run_operation(w, k))


def target_runs(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/stageruns/{stage_run_id}/targetruns/ (``status``,
    ``stage_run_operation_id``, ``ordering`` by status)."""
    f, b = w.fleet, P.book(w)
    s = _stage_run(w, req)
    items = list(b.stage_runs[s].targets)
    status = _choice(req, "status", TARGET_RUN_STATUSES)
    op = req.query.get("stage_run_operation_id")
    if op and check_uuid(op, "stage_run_operation_id") != b.stage_runs[s].operation_id:
        items = []
    now = {t: target_state(f, b.target_runs[t])[0] for t in items}
    if status is not None:
        items = [t for t in items if now[t] == status]
    _order(items, _choice(req, "ordering", ("status", "-status")), {"status": now.__getitem__})
    return _page(req, items, lambda t: P.target_run(w, t))


def target_run_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /pipelines/v0/stageruns/{stage_run_id}/targetruns/{target_run_id}/."""
    s = _stage_run(w, req)
    t = _find(w, "target_runs", req.params["target_run_id"], "Target run")
    if P.book(w).target_runs[t].stage_run != s:
        raise ApiError(404, f"Target run {req.params['target_run_id']} not found")
    return 200, ok(P.target_run(w, t))


# -- truth ------------------------------------------------------------------------------


def _every(kind: str, build: Callable[[World, int], Record]) -> Callable[[World], list[Record]]:
    def truth(w: World) -> list[Record]:
        return [build(w, i) for i in range(len(getattr(P.book(w), kind)))]

    truth.__doc__ = f"Every {kind[:-1].replace('_', ' ')} of the tenant, as served now."
    return truth


def stage_operations(w: World) -> list[Record]:
    """Every stage's planned operations, each with its stage and its list's name."""
    b = P.book(w)
    return [
        {
            **P.operation(w, s),
            "stage_id": x.id,
            "operation_list_name": P.operation_list(w, s)["name"],
        }
        for s, x in enumerate(b.stages)
    ]


def stage_targets(w: World) -> list[Record]:
    """Every stage's planned targets: a DEVICES list's devices, a GROUPS list's groups, each
    with its stage and its list (id, name, type)."""
    rows: list[Record] = []
    for s, x in enumerate(P.book(w).stages):
        tl = P.target_list(w, s)
        listed = {"stage_id": x.id, "target_list_id": tl["id"], "target_list_name": tl["name"],
                  "target_list_type": tl["target_list_type"]}  # fmt: skip
        rows += [{**P.target(w, s, d), **listed} for d in x.devices]
        rows += [{**P.target_group(w, s, g), **listed, "pipeline_id": tl["pipeline_id"]}
                 for g in x.groups]  # fmt: skip
    return rows


PIPE = "/pipelines/v0/pipelines/{pipeline_id}"
TARGET_LIST = PIPE + "/targetlists/{targetlist_id}"
RUN = "/pipelines/v0/runs/{pipeline_run_id}"
STAGE_RUN = "/pipelines/v0/stageruns/{stage_run_id}"
AREA = Area(
    routes=(
        Route("GET", PIPELINES.path, V2, pipelines_list),
        Route("GET", PIPE + "/", V2, pipeline_detail),
        Route("GET", PIPE + "/stages/", V2, stages_list),
        Route("GET", PIPE + "/stages/{stage_id}/", V2, stage_detail),
        Route("GET", "/pipelines/v0/stages/{stage_id}/operationlists/", V2, stage_operation_lists),
        Route(
            "GET",
            "/pipelines/v0/operationlists/{operationlist_id}/operations/",
            V2,
            operations_of_list,
        ),
        Route("GET", "/pipelines/v0/stages/{stage_id}/targetlists/", V2, stage_target_lists),
        Route("GET", TARGET_LIST + "/targets/", V2, targets_of_list),
        Route("GET", TARGET_LIST + "/devicegroups/", V2, groups_of_list),
        Route("GET", PIPELINE_RUNS.path, V2, runs_list),
        Route("GET", PIPE + "/runs/", V2, pipeline_runs),
        Route("GET", PIPE + "/runs/{pipeline_run_id}/", V2, run_detail),
        Route("GET", RUN + "/stageruns/", V2, stage_runs),
        Route("GET", RUN + "/stageruns/{stage_run_id}/", V2, stage_run_detail),
        Route("GET", STAGE_RUN + "/operations/", V2, stage_run_operations),
        Route("GET", STAGE_RUN + "/targetruns/", V2, target_runs),
        Route("GET", STAGE_RUN + "/targetruns/{target_run_id}/", V2, target_run_detail),
    ),
    truth={
        "pipelines": _every("pipelines", P.pipeline),
        "pipeline_stages": _every("stages", P.stage),
        "pipeline_runs": _every("runs", P.run),
        "pipeline_stage_runs": _every("stage_runs", P.stage_run),
        "pipeline_stage_run_operations": _every("stage_runs", P.stage_run_operation),
        "pipeline_target_runs": _every("target_runs", P.target_run),
        "pipeline_stage_operations": stage_operations,
        "pipeline_stage_targets": stage_targets,
    },
)
