"""Command routes (``/commands/v0/``): command requests, their stats and per-device statuses."""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.http import V2, ApiError, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, content_list, lookup, ok
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record


def commands_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/commands/ (newest created_at first; not documented)."""
    f = w.fleet
    items = w.commands_newest_first()
    devs = req.csv_param("devices")
    if devs is not None:
        wanted = {f.index.get(d.lower(), -1) for d in devs}
        items = [r for r in items if wanted.intersection(f.commands[r].devices)]
    groups = req.csv_param("groups")
    if groups is not None:
        gids = {g.lower() for g in groups}
        items = [
            r
            for r in items
            if f.commands[r].group >= 0 and f.groups[f.commands[r].group].id in gids
        ]
    if req.query.get("command"):
        items = [r for r in items if C.COMMANDS[f.commands[r].command][0] == req.query["command"]]
    sched = req.query.get("schedule")
    if sched:
        if sched not in ("IMMEDIATE", "WINDOW", "RECURRING"):
            raise ApiError(400, "schedule: must be IMMEDIATE, WINDOW or RECURRING")
        items = [r for r in items if f.commands[r].schedule == sched]
    return 200, ok(content_list(req, items, w.wire.command, "prev"))  # live: prev


def command_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/commands/{id}/."""
    return 200, ok(w.wire.command(lookup(w.fleet.command_index, req.params["id"], "Command")))


def command_stats(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/commands/{id}/stats/."""
    f = w.fleet
    r = lookup(f.command_index, req.params["id"], "Command")
    counts = [0] * len(C.COMMAND_STATES)
    for s in f.commands[r].statuses:
        counts[f.statuses[s].state] += 1
    status = [{"state": C.COMMAND_STATES[k], "total": n} for k, n in enumerate(counts) if n]
    return 200, ok({"id": f.commands[r].id, "status": status})


def statuses_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/status/ (``request`` or ``device`` required, comma-separated)."""
    f = w.fleet
    reqs, devs = req.csv_param("request"), req.csv_param("device")
    if reqs is None and devs is None:
        raise ApiError(400, "request or device is required")
    items: list[int]
    if reqs is not None:
        items = []
        for rid in reqs:
            r = f.command_index.get(rid.lower())
            if r is not None:
                items.extend(f.commands[r].statuses)
        if devs is not None:
            dset = {f.index.get(d.lower(), -1) for d in devs}
            items = [s for s in items if f.statuses[s].device in dset]
    else:
        dset = {f.index.get(d.lower(), -1) for d in devs or []}
        items = [s for s, st in enumerate(f.statuses) if st.device in dset]
    state = req.query.get("state")
    if state:
        if state not in C.COMMAND_STATES:
            raise ApiError(400, f"state: invalid value {state!r}")
        k = C.COMMAND_STATES.index(state)
        items = [s for s in items if f.statuses[s].state == k]
    items.sort(key=lambda s: (f.statuses[s].created, f.statuses[s].id))
    return 200, ok(content_list(req, items, w.wire.command_status, "prev"))  # live: prev


def status_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/status/{id}/."""
    s = lookup(w.fleet.status_index, req.params["id"], "Command status")
    return 200, ok(w.wire.command_status(s))


def truth_command_requests(w: World) -> list[Record]:
    """Every command request, newest first."""
    return [w.wire.command(r) for r in w.commands_newest_first()]


def truth_command_statuses(w: World) -> list[Record]:
    """Every command status (one per request and device)."""
    return [w.wire.command_status(s) for s in range(len(w.fleet.statuses))]


AREA = Area(
    routes=(
        Route("GET", "/commands/v0/commands/", V2, commands_list),
        Route("GET", "/commands/v0/commands/{id}/", V2, command_detail),
        Route("GET", "/commands/v0/commands/{id}/stats/", V2, command_stats),
        Route("GET", "/commands/v0/status/", V2, statuses_list),
        Route("GET", "/commands/v0/status/{id}/", V2, status_detail),
    ),
    truth={
        "command_requests": truth_command_requests,
        "command_statuses": truth_command_statuses,
    },
)
