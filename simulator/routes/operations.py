"""Operation routes (``/v0/operations/``): operations and their per-device parts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.http import V2, ApiError, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, content_list, lookup
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record


def _ordering(
    req: Req, keys: dict[str, Callable[[int], Any]], default: str
) -> tuple[Callable, bool]:
    ordering = req.query.get("ordering") or default
    name = ordering.lstrip("-")
    if name not in keys:
        raise ApiError(400, f"ordering: must be one of {', '.join(keys)} (prefix - to reverse)")
    return keys[name], ordering.startswith("-")


def _int_state(req: Req, mapping: dict[int, int]) -> int | None:
    raw = req.query.get("state")
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "state: an integer is required") from None
    inverse = {v: k for k, v in mapping.items()}
    return inverse.get(value, -1)


def operations_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v0/operations/ (ordering created_at/state/updated_at, integer state filter)."""
    ops = w.fleet.operations
    keys = {
        "created_at": lambda o: ops[o].created,
        "state": lambda o: C.OPERATION_STATE_INT[ops[o].state],
        "updated_at": lambda o: ops[o].updated,
    }
    keyf, desc = _ordering(req, keys, "-created_at")
    items = list(range(len(ops)))
    state = _int_state(req, C.OPERATION_STATE_INT)
    if state is not None:
        items = [o for o in items if ops[o].state == state]
    op_type = req.query.get("operation_type")
    if op_type and op_type != "CONVERGE":
        items = []
    items.sort(key=lambda o: ops[o].id)
    items.sort(key=keyf, reverse=desc)
    return 200, {"content": content_list(req, items, w.wire.operation, "previous")}


def operation_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /v0/operations/{id}/."""
    o = lookup(w.fleet.operation_index, req.params["id"], "Operation")
    return 200, {"content": w.wire.operation(o)}


def operation_devices(w: World, req: Req) -> tuple[int, Body]:
    """GET /v0/operations/{id}/devices/."""
    f = w.fleet
    o = lookup(f.operation_index, req.params["id"], "Operation")
    parts = f.op_devices
    keys = {
        "created_at": lambda p: parts[p].created,
        "state": lambda p: C.OP_DEVICE_STATE_INT[parts[p].state],
        "updated_at": lambda p: parts[p].updated,
    }
    keyf, desc = _ordering(req, keys, "created_at")
    items = list(f.operations[o].parts)
    state = _int_state(req, C.OP_DEVICE_STATE_INT)
    if state is not None:
        items = [p for p in items if parts[p].state == state]
    items.sort(key=lambda p: parts[p].id)
    items.sort(key=keyf, reverse=desc)
    return 200, {"content": content_list(req, items, w.wire.operation_device, "previous")}


def truth_operations(w: World) -> list[Record]:
    """Every operation."""
    return [w.wire.operation(o) for o in range(len(w.fleet.operations))]


def truth_operation_devices(w: World) -> list[Record]:
    """Every device part of every operation."""
    return [w.wire.operation_device(p) for p in range(len(w.fleet.op_devices))]


AREA = Area(
    routes=(
        Route("GET", "/v0/operations/", V2, operations_list),
        Route("GET", "/v0/operations/{id}/", V2, operation_detail),
        Route("GET", "/v0/operations/{id}/devices/", V2, operation_devices),
    ),
    truth={"operations": truth_operations, "operation_devices": truth_operation_devices},
)
