"""Device routes: the v2 device list (offset and cursor modes), device detail, the legacy
device list and detail, heartbeats and a device's event feed.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Callable

import orjson
from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.http import LEGACY, V2, ApiError, Req, check_uuid
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import (
    Body,
    content_list,
    find_device,
    legacy_list,
    ok,
    v2_list,
)
from esper_warehouse.simulator.state import DEVICE_ORDERINGS, World
from esper_warehouse.simulator.wire.base import Record


def _device_filter(w: World, req: Req) -> Callable[[int], bool] | None:
    f = w.fleet
    preds: list[Callable[[int], bool]] = []
    q = req.query
    states = req.csv_param("state")
    if states is not None:
        try:
            wanted = {int(s) for s in states}
        except ValueError:
            raise ApiError(400, "state: integers expected") from None
        preds.append(lambda i: f.state[i] in wanted)
    plats = req.csv_param("platform")
    if plats is not None:
        bad = [p for p in plats if p.upper() not in C.PLATFORMS]
        if bad:
            raise ApiError(400, f"platform: unknown value(s) {', '.join(bad)}")
        pset = {C.PLATFORMS.index(p.upper()) for p in plats}
        preds.append(lambda i: C.OS_PLATFORM[f.os[i]] in pset)
    if q.get("os"):
        if q["os"] not in C.OS_NAMES:
            raise ApiError(400, f"os: must be one of {', '.join(C.OS_NAMES)}")
        o = C.OS_NAMES.index(q["os"])
        preds.append(lambda i: f.os[i] == o)
    for name, deep in (("group_multi", True), ("group_multi_immediate", False)):
        gids = req.csv_param(name)
        if gids is not None:
            for g in gids:
                check_uuid(g, name)
            by_id = {grp.id: k for k, grp in enumerate(f.groups)}
            found = [by_id[g.lower()] for g in gids if g.lower() in by_id]
            groups: set[int] = set()
            for g in found:
                groups |= w.group_descendants(g) if deep else {g}
            preds.append(lambda i, gs=groups: f.group[i] in gs)
    if q.get("serial"):
        serial = q["serial"]
        preds.append(lambda i: f.serial[i] == serial)
    gms = req.bool_param("is_gms")
    if gms is not None:
        preds.append(lambda i: f.is_gms[i] == gms)
    lo = req.int_param("battery_level_gte", -1, minimum=-1)
    hi = req.int_param("battery_level_lte", 10**9)
    if lo >= 0 or hi < 10**9:
        preds.append(lambda i: lo <= f.battery[i] <= hi)
    for name, col in (
        ("assigned_blueprint_id", f.bp_assigned),
        ("current_blueprint_id", f.bp_current),
    ):
        if q.get(name):
            bid = q[name].lower()
            bps = {k for k, bp in enumerate(f.blueprints) if bp.id == bid}
            preds.append(lambda i, c=col, s=bps: c[i] in s)
    if q.get("current_blueprint_version_id"):
        vid = q["current_blueprint_version_id"].lower()
        gs = {g for g, (b, v) in enumerate(f.bp_versions) if f.blueprints[b].versions[v].id == vid}
        preds.append(lambda i: f.bp_ver[i] in gs)
    if q.get("esper_agent_version_name"):
        name = q["esper_agent_version_name"]
        preds.append(lambda i: C.AGENTS[C.OS_PLATFORM[f.os[i]]][f.agent[i]][0] == name)
    if q.get("search"):
        s = q["search"].lower()
        preds.append(
            lambda i: s in f.name[i].lower() or s in f.serial[i].lower() or s in f.alias[i].lower()
        )
    tags = req.csv_param("tags")
    if tags is not None:
        wanted_tags = {t for t, tid in w.wire.tag_ids.items() if tid in {x.lower() for x in tags}}
        preds.append(lambda i: bool(wanted_tags.intersection(f.tags[i])))
    if not preds:
        return None
    return lambda i: all(p(i) for p in preds)


def _encode_cursor(w: World, i: int, direction: str) -> str:
    from esper_warehouse.simulator.timeutil import iso

    f = w.fleet
    token = {"sv": [{"c": "updated_at", "v": iso(f.updated[i]), "o": "DESC"}], "uv": f.ids[i]}
    if direction == "prev":
        token["d"] = "prev"
    return base64.b64encode(orjson.dumps(token)).decode()


def _decode_cursor(raw: str) -> tuple[int, str, str]:
    from esper_warehouse.simulator.timeutil import parse_iso

    try:
        data = orjson.loads(base64.b64decode(raw + "=" * (-len(raw) % 4), validate=False))
        ts = parse_iso(data["sv"][0]["v"])
        return ts, str(data["uv"]), data.get("d", "next")
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise ApiError(400, "cursor: invalid cursor token") from None


def devices_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/devices/ in offset mode or cursor mode."""
    f = w.fleet
    ordering = req.query.get("ordering") or "-created_at"
    if ordering not in DEVICE_ORDERINGS:
        raise ApiError(400, f"ordering: invalid value {ordering!r}")
    pred = _device_filter(w, req)
    cursor = req.query.get("cursor")
    if cursor:
        limit = min(req.int_param("limit", 10) or 10, 1000)
        order = w.device_order("updated_desc")
        if pred is not None:
            order = [i for i in order if pred(i)]
        upd, ids = f.updated, f.ids

        def key(i: int) -> tuple[int, str]:
            return (-upd[i], ids[i])

        if cursor == "start":
            start = 0
        else:
            ts, did, direction = _decode_cursor(cursor)
            pos = bisect.bisect_right(order, (-ts, did), key=key)
            if direction == "prev":
                pos = bisect.bisect_left(order, (-ts, did), key=key)
                start = max(0, pos - limit)
                limit = pos - start
            else:
                start = pos
        page = order[start : start + limit]
        has_more = start + len(page) < len(order)
        has_prev = start > 0
        content = {
            "results": [w.wire.device(i) for i in page],
            "next_cursor": _encode_cursor(w, page[-1], "next") if page and has_more else None,
            "prev_cursor": _encode_cursor(w, page[0], "prev") if page and has_prev else None,
            "has_more": has_more,
            "has_prev": has_prev,
        }
        return 200, {"content": content}
    order = w.device_order(ordering)
    if pred is not None:
        order = [i for i in order if pred(i)]
    return 200, v2_list(req, order, w.wire.device, default=10)


def device_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/devices/{id}: ``{content}`` with no code or message (live route 12)."""
    check_uuid(req.params["id"], "id")
    return 200, {"content": w.wire.device_detail(find_device(w, req.params["id"]))}


def legacy_devices(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/device/ (legacy envelope; live route 14), created order.

    Filters of the subset served here: ``state``, ``serial``, ``is_gms``, ``search``, ``tags``
    and the blueprint ids (as on /v2/devices/), plus the legacy ``name`` (part of the name, any
    case), ``group`` (a group id: the devices directly in it) and ``brand``.
    """
    f = w.fleet
    order = w.device_order("created_at")
    pred = _device_filter(w, req)
    if pred is not None:
        order = [i for i in order if pred(i)]
    q = req.query
    if q.get("name"):
        name = q["name"].lower()
        order = [i for i in order if name in f.name[i].lower()]
    if q.get("group"):
        gid = check_uuid(q["group"], "group")
        order = [i for i in order if f.group[i] != C.NO_GROUP and f.groups[f.group[i]].id == gid]
    if q.get("brand"):
        brand = q["brand"].lower()
        order = [i for i in order if C.MODELS[f.model[i]].brand.lower() == brand]
    return 200, legacy_list(req, order, w.wire.device_legacy)


def legacy_device_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/device/{id}/ (bare object; live route 11)."""
    return 200, {
        **w.wire.device_legacy(find_device(w, req.params["id"])),
        "foundation_config": None,
    }


def heartbeat(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/heartbeat/?last_seen_gt&last_seen_lt (both required)."""
    gt, lt = req.time_param("last_seen_gt"), req.time_param("last_seen_lt")
    if gt is None or lt is None:
        raise ApiError(400, "last_seen_gt and last_seen_lt are required")
    f = w.fleet
    plat = req.query.get("platform")
    if plat and plat not in C.PLATFORMS:
        raise ApiError(400, "platform: must be one of ANDROID, APPLE, LINUX, WINDOWS")
    order = w.heartbeat_order()
    ls = f.last_seen
    lo = bisect.bisect_right(order, gt, key=lambda i: ls[i])
    hi = bisect.bisect_left(order, lt, key=lambda i: ls[i])
    items = order[lo:hi]
    if plat:
        p = C.PLATFORMS.index(plat)
        items = [i for i in items if C.OS_PLATFORM[f.os[i]] == p]
    return 200, ok(content_list(req, items, w.wire.heartbeat, "prev"))


def eventfeed(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/device/{id}/download/eventfeed/ (newest first, limit 250)."""
    i = find_device(w, req.params["id"])
    events = w.events_newest_first(i)
    return 200, legacy_list(req, events, lambda ev: w.wire.event(i, ev), limit_default=250)


def truth_devices(w: World) -> list[Record]:
    """The detail record: everything the API holds about a device, patch level included.

    List items lack the patch level; the warehouse gets it from the legacy list, another route.
    """
    return [w.wire.device_detail(i) for i in w.device_order("updated_desc")]


def truth_heartbeats(w: World) -> list[Record]:
    """One heartbeat per device ever seen."""
    f = w.fleet
    return [w.wire.heartbeat(i) for i in f.live() if f.last_seen[i] >= 0]


def truth_device_events(w: World) -> list[Record]:
    """Every event of every live device, newest first per device, with its ``device_id``."""
    f = w.fleet
    out = []
    for i in f.live():
        for ev in w.events_newest_first(i):
            rec = w.wire.event(i, ev)
            rec["device_id"] = f.ids[i]
            out.append(rec)
    return out


AREA = Area(
    routes=(
        Route("GET", "/v2/devices/", V2, devices_list),
        Route("GET", "/v2/devices/{id}", V2, device_detail),
        Route("GET", "/v2/heartbeat/", V2, heartbeat),
        Route("GET", "/enterprise/{eid}/device/", LEGACY, legacy_devices),
        Route("GET", "/enterprise/{eid}/device/{id}/", LEGACY, legacy_device_detail),
        Route("GET", "/enterprise/{eid}/device/{id}/download/eventfeed/", LEGACY, eventfeed),
    ),
    truth={
        "devices": truth_devices,
        "heartbeats": truth_heartbeats,
        "device_events": truth_device_events,
    },
)
