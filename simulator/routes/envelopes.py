"""Response envelopes and lookups every route module shares.

The API has three list shapes (legacy/v1 ``{count, next, previous, results}``, v0/v2 content
lists, the v2 ``{content: {...}}`` envelope) and the ``{code, message, content}`` success
envelope; the lookups turn an id from the path into an index or answer 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from esper_warehouse.simulator.http import ApiError, Req, page_links
from esper_warehouse.simulator.state import World

Body = Any


def legacy_list(req: Req, items: list[Any], build: Callable[[Any], Any], limit_default: int = 20):
    """Legacy/v1 envelope ``{count, next, previous, results}`` with absolute links."""
    offset, limit = req.page(limit_default)
    nxt, prev = page_links(req, offset, limit, len(items))
    results = [build(x) for x in items[offset : offset + limit]]
    return {"count": len(items), "next": nxt, "previous": prev, "results": results}


def content_list(
    req: Req,
    items: list[Any],
    build: Callable[[Any], Any],
    prev_key: str,
    default: int = 20,
    *,
    null_when_empty: bool = False,
) -> dict[str, Any]:
    """v0/v2 list content ``{count, next, prev|previous, results}``.

    ``null_when_empty``: the v2 services answer an empty list with ``results: null`` (live
    evidence, live-observations.md section 2: ``/v2/devices/{id}/device-apps/`` with count 0).
    """
    offset, limit = req.page(default)
    nxt, prev = page_links(req, offset, limit, len(items))
    results = [build(x) for x in items[offset : offset + limit]]
    if not results and null_when_empty:
        return {"count": len(items), "next": nxt, prev_key: prev, "results": None}
    return {"count": len(items), "next": nxt, prev_key: prev, "results": results}


def v2_list(
    req: Req, items: list[Any], build: Callable[[Any], Any], default: int = 20
) -> dict[str, Any]:
    """The v2 list envelope as recorded live: ``{content: {count, next, prev, results}}``, no
    code or message, ``results: null`` when empty (live-observations.md sections 1-2)."""
    return {"content": content_list(req, items, build, "prev", default, null_when_empty=True)}


def ok(content: Any) -> dict[str, Any]:
    """``{code, message, content}`` success envelope."""
    return {"code": 200, "message": "Success", "content": content}


def lookup(index: dict[str, int], key: str, what: str) -> int:
    i = index.get(key.lower())
    if i is None:
        raise ApiError(404, f"{what} {key} not found")
    return i


def find_device(w: World, device_id: str) -> int:
    i = w.fleet.index.get(device_id.lower())
    if i is None or w.fleet.removed[i]:
        raise ApiError(404, f"Device {device_id} not found")
    return i
