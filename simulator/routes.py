"""The Esper API routes: one handler per path, each returning (status, JSON-able body).

Paths are relative to ``/api``; envelopes, parameter names and defaults follow the OpenAPI
subset path by path. Handlers run under the world lock (taken by the app).
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Callable
from typing import Any

import orjson
from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator import datatap
from esper_warehouse.simulator.http import (
    LEGACY,
    REPORTS,
    V2,
    ApiError,
    Req,
    check_uuid,
    page_links,
)
from esper_warehouse.simulator.state import DEVICE_ORDERINGS, World

Body = Any
Handler = Callable[[World, Req], tuple[int, Body]]


# -- envelopes -------------------------------------------------------------------------


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


def _lookup(index: dict[str, int], key: str, what: str) -> int:
    i = index.get(key.lower())
    if i is None:
        raise ApiError(404, f"{what} {key} not found")
    return i


def _device(w: World, device_id: str) -> int:
    i = w.fleet.index.get(device_id.lower())
    if i is None or w.fleet.removed[i]:
        raise ApiError(404, f"Device {device_id} not found")
    return i


# -- devices ---------------------------------------------------------------------------


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
    return 200, {"content": w.wire.device_detail(_device(w, req.params["id"]))}


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
    return 200, {**w.wire.device_legacy(_device(w, req.params["id"])), "foundation_config": None}


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


# -- groups ----------------------------------------------------------------------------


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


# -- blueprints ------------------------------------------------------------------------


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


# -- apps ------------------------------------------------------------------------------


def _tenant_app(w: World, app_id: str) -> int:
    for k, a in enumerate(w.fleet.tenant_apps):
        if a.id == app_id.lower():
            return k
    raise ApiError(404, f"App {app_id} not found")


def tenant_apps(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/tenant-apps."""
    f = w.fleet
    items = list(range(len(f.tenant_apps)))
    plat = req.query.get("platform")
    if plat:
        if plat not in ("APPLE", "WINDOWS"):
            raise ApiError(400, "platform: must be APPLE or WINDOWS")
        items = [k for k in items if C.PLATFORMS[f.tenant_apps[k].platform] == plat]
    if req.query.get("package_name"):
        items = [k for k in items if f.tenant_apps[k].package == req.query["package_name"]]
    if req.query.get("app_name"):
        s = req.query["app_name"].lower()
        items = [k for k in items if s in f.tenant_apps[k].name.lower()]
    return 200, v2_list(req, items, w.wire.tenant_app)


def tenant_app_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/tenant-apps/{appId}."""
    return 200, {"content": w.wire.tenant_app(_tenant_app(w, req.params["id"]))}


def tenant_app_versions(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/tenant-apps/{appId}/versions."""
    k = _tenant_app(w, req.params["id"])
    items = list(range(len(w.fleet.tenant_apps[k].versions)))
    return 200, {
        "content": content_list(req, items, lambda v: w.wire.tenant_app_version(k, v), "prev")
    }


def _time_window(req: Req, items: list[int], stamp: Callable[[int], int], prefix: str) -> list[int]:
    gt, lt = req.time_param(f"{prefix}_gt"), req.time_param(f"{prefix}_lt")
    if gt is not None:
        items = [k for k in items if stamp(k) > gt]
    if lt is not None:
        items = [k for k in items if stamp(k) < lt]
    return items


NOT_FOUND = "detail: Not found."  # the legacy/v1 404 text (live §11)


def _legacy_listed(w: World, k: int) -> bool:
    """Whether the legacy application routes know app ``k`` (live §11: they miss some)."""
    return w.fleet.legacy_apps[k].kind not in C.LEGACY_UNLISTED_KINDS


def _application(w: World, app_id: str, *, legacy: bool = False) -> int:
    """Index of the Android application ``app_id``; 404 when unknown (to the legacy routes
    when ``legacy``)."""
    apps = w.fleet.legacy_apps
    k = next((n for n, a in enumerate(apps) if a.id == app_id.lower()), None)
    if k is None or (legacy and not _legacy_listed(w, k)):
        raise ApiError(404, NOT_FOUND)
    return k


def _app_version(w: World, k: int, version_id: str) -> int:
    vers = w.fleet.legacy_apps[k].versions
    v = next((n for n, ver in enumerate(vers) if ver.id == version_id.lower()), None)
    if v is None:
        raise ApiError(404, NOT_FOUND)
    return v


def applications(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/application/ (legacy; live route 1): misses the apps of
    ``catalog.LEGACY_UNLISTED_KINDS``, as the live list missed 328 of 752."""
    apps = w.fleet.legacy_apps
    items = [k for k in range(len(apps)) if _legacy_listed(w, k)]
    items = _time_window(req, items, lambda k: apps[k].updated, "updated_on")
    items = _time_window(req, items, lambda k: apps[k].created, "created_on")
    if req.query.get("package_name"):
        items = [k for k in items if req.query["package_name"] in apps[k].package]
    if req.query.get("package_name_exact"):
        items = [k for k in items if apps[k].package == req.query["package_name_exact"]]
    if req.query.get("application_name"):
        s = req.query["application_name"].lower()
        items = [k for k in items if s in apps[k].name.lower()]
    active = req.bool_param("is_active")
    if active is False:
        items = []
    return 200, legacy_list(req, items, w.wire.application)


def application_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/application/{id}/ (legacy; 404 for the apps it misses, route 3)."""
    return 200, w.wire.application(_application(w, req.params["id"], legacy=True))


def application_versions(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/application/{id}/version/ (legacy; live route 5).

    For an app the legacy routes miss, the live answer was an empty list (count 0, ``results:
    []``) while v1 listed its version; an unknown id is a 404.
    """
    k = _application(w, req.params["id"])
    vers = w.fleet.legacy_apps[k].versions
    items = list(range(len(vers))) if _legacy_listed(w, k) else []
    items = _time_window(req, items, lambda v: vers[v].updated, "updated_on")
    items = _time_window(req, items, lambda v: vers[v].created, "created_on")
    if req.query.get("version_code"):
        items = [v for v in items if vers[v].code == req.query["version_code"]]
    ordering = req.query.get("ordering")
    if ordering:
        name = ordering.lstrip("-")
        keys = {"created_on": lambda v: vers[v].created, "updated_on": lambda v: vers[v].updated}
        keys["version_code"] = lambda v: int(vers[v].code)
        if name not in keys:
            raise ApiError(400, f"ordering: cannot order by {name!r}")
        items.sort(key=keys[name], reverse=ordering.startswith("-"))
    return 200, legacy_list(req, items, lambda v: w.wire.application_version(k, v))


def application_version_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/application/{id}/version/{vid}/ (legacy; 404 for the apps it
    misses, live route 7)."""
    k = _application(w, req.params["id"], legacy=True)
    return 200, w.wire.application_version(k, _app_version(w, k, req.params["vid"]))


def applications_v1(w: World, req: Req) -> tuple[int, Body]:
    """GET /v1/enterprise/{eid}/application/: the whole Android catalogue (live route 2)."""
    apps = w.fleet.legacy_apps
    items = list(range(len(apps)))
    if req.query.get("package_name"):
        items = [k for k in items if req.query["package_name"] in apps[k].package]
    return 200, legacy_list(req, items, w.wire.application_v1)


def application_detail_v1(w: World, req: Req) -> tuple[int, Body]:
    """GET /v1/enterprise/{eid}/application/{id}/: the v1 list item (live route 4)."""
    return 200, w.wire.application_v1(_application(w, req.params["id"]))


def application_version_detail_v1(w: World, req: Req) -> tuple[int, Body]:
    """GET /v1/enterprise/{eid}/application/{id}/version/{vid}/: the v1 list item (route 8)."""
    k = _application(w, req.params["id"])
    return 200, w.wire.application_version_v1(k, _app_version(w, k, req.params["vid"]))


def application_versions_v1(w: World, req: Req) -> tuple[int, Body]:
    """GET /v1/enterprise/{eid}/application/{id}/version/ (live route 6)."""
    k = _application(w, req.params["id"])
    items = list(range(len(w.fleet.legacy_apps[k].versions)))
    return 200, legacy_list(req, items, lambda v: w.wire.application_version_v1(k, v))


def install_devices(w: World, req: Req) -> tuple[int, Body]:
    """GET .../application/{id}/version/{vid}/installdevices (live routes 9, 10; equal bodies)."""
    k = _application(w, req.params["id"])
    v = _app_version(w, k, req.params["vid"])
    f = w.fleet

    def build(i: int) -> dict[str, Any]:
        return {
            "id": f.ids[i],
            "device_name": f.name[i],
            "alias_name": f.alias[i] or None,
            "group_name": f.groups[f.group[i]].name if f.group[i] != C.NO_GROUP else None,
        }

    return 200, legacy_list(req, f.installed_on(k, v), build)


def device_apps_legacy(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/device/{id}/app/ (Android installed apps)."""
    i = _device(w, req.params["id"])
    f = w.fleet
    entries = f.apps[i] if f.platform(i) == C.ANDROID else []
    pkg = req.query.get("package_name")
    if pkg:
        entries = [e for e in entries if f.legacy_apps[e[0]].package == pkg]
    return 200, legacy_list(req, entries, lambda e: w.wire.device_app_legacy(i, e))


_V2_APP_TYPES = ("VPP", "TENANT_IOS", "ESPER_IOS", "WEBCLIP", "ESPER_WINDOWS", "TENANT_WINDOWS")


def device_apps_v2(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/devices/{id}/device-apps/ (Apple and Windows installed apps)."""
    i = _device(w, req.params["id"])
    records = w.installed(i) if w.fleet.platform(i) in (C.APPLE, C.WINDOWS) else []
    app_type = req.query.get("app_type")
    if app_type:
        if app_type not in _V2_APP_TYPES:
            raise ApiError(400, f"app_type: must be one of {', '.join(_V2_APP_TYPES)}")
        records = [r for r in records if r["app_type"] == app_type]
    return 200, v2_list(req, records, lambda r: r)


def device_apps_by_version(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/device-apps?app_id&app_version_id (both required)."""
    app_id, ver_id = req.query.get("app_id"), req.query.get("app_version_id")
    if not app_id or not ver_id:
        raise ApiError(400, "app_id and app_version_id are required")
    app_id, ver_id = check_uuid(app_id, "app_id"), check_uuid(ver_id, "app_version_id")
    f = w.fleet
    k = next((n for n, a in enumerate(f.tenant_apps) if a.id == app_id), None)
    pairs: list[tuple[int, tuple[int, int, int, int]]] = []
    if k is not None:
        vs = [v for v, ver in enumerate(f.tenant_apps[k].versions) if ver.id == ver_id]
        if vs:
            v = vs[0]
            for i in w.device_order("created_at"):
                if f.platform(i) in (C.APPLE, C.WINDOWS):
                    pairs.extend((i, e) for e in f.apps[i] if e[0] == k and e[1] == v)
    return 200, v2_list(req, pairs, lambda p: w.wire.device_app_v2(*p))


# -- commands --------------------------------------------------------------------------


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
    return 200, ok(w.wire.command(_lookup(w.fleet.command_index, req.params["id"], "Command")))


def command_stats(w: World, req: Req) -> tuple[int, Body]:
    """GET /commands/v0/commands/{id}/stats/."""
    f = w.fleet
    r = _lookup(f.command_index, req.params["id"], "Command")
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
    s = _lookup(w.fleet.status_index, req.params["id"], "Command status")
    return 200, ok(w.wire.command_status(s))


# -- operations ------------------------------------------------------------------------


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
    o = _lookup(w.fleet.operation_index, req.params["id"], "Operation")
    return 200, {"content": w.wire.operation(o)}


def operation_devices(w: World, req: Req) -> tuple[int, Body]:
    """GET /v0/operations/{id}/devices/."""
    f = w.fleet
    o = _lookup(f.operation_index, req.params["id"], "Operation")
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


# -- event feed ------------------------------------------------------------------------


def eventfeed(w: World, req: Req) -> tuple[int, Body]:
    """GET /enterprise/{eid}/device/{id}/download/eventfeed/ (newest first, limit 250)."""
    i = _device(w, req.params["id"])
    events = w.events_newest_first(i)
    return 200, legacy_list(req, events, lambda ev: w.wire.event(i, ev), limit_default=250)


# -- reports ---------------------------------------------------------------------------


def status_metrics(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/enterprise/{eid}/report/status-metrics: a bare object (live route 23)."""
    return 200, w.wire.status_metrics()


# -- data tap --------------------------------------------------------------------------


def datatap_create(w: World, req: Req) -> tuple[int, Body]:
    """POST /data-tap/v0/queries."""
    return datatap.create(w, req)


def datatap_get(w: World, req: Req) -> tuple[int, Body]:
    """GET /data-tap/v0/queries/{id}."""
    return datatap.get(w, req)


EID = "{eid}"
# (method, path template after /api, family, handler, needs enterprise id check)
ROUTES: tuple[tuple[str, str, str, Handler], ...] = (
    ("GET", "/v2/devices/", V2, devices_list),
    ("GET", "/v2/devices/{id}", V2, device_detail),
    ("GET", "/v2/heartbeat/", V2, heartbeat),
    ("GET", "/v2/subgroups", LEGACY, subgroups),
    ("GET", "/v2/blueprints/", V2, blueprints_list),
    ("GET", "/v2/blueprints/{id}/", V2, blueprint_detail),
    ("GET", "/v2/blueprints/{id}/versions/", V2, blueprint_versions),
    ("GET", "/v2/tenant-apps", V2, tenant_apps),
    ("GET", "/v2/tenant-apps/{id}", V2, tenant_app_detail),
    ("GET", "/v2/tenant-apps/{id}/versions", V2, tenant_app_versions),
    ("GET", "/v2/devices/{id}/device-apps/", V2, device_apps_v2),
    ("GET", "/v2/device-apps", V2, device_apps_by_version),
    ("GET", "/enterprise/{eid}/device/", LEGACY, legacy_devices),
    ("GET", "/enterprise/{eid}/device/{id}/", LEGACY, legacy_device_detail),
    ("GET", "/enterprise/{eid}/devicegroup/", LEGACY, devicegroups),
    ("GET", "/enterprise/{eid}/application/", LEGACY, applications),
    ("GET", "/enterprise/{eid}/application/{id}/", LEGACY, application_detail),
    ("GET", "/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions),
    (
        "GET",
        "/enterprise/{eid}/application/{id}/version/{vid}/",
        LEGACY,
        application_version_detail,
    ),
    ("GET", "/v1/enterprise/{eid}/application/", LEGACY, applications_v1),
    ("GET", "/v1/enterprise/{eid}/application/{id}/", LEGACY, application_detail_v1),
    ("GET", "/v1/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions_v1),
    (
        "GET",
        "/v1/enterprise/{eid}/application/{id}/version/{vid}/",
        LEGACY,
        application_version_detail_v1,
    ),
    (
        "GET",
        "/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
        LEGACY,
        install_devices,
    ),
    (
        "GET",
        "/v1/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
        LEGACY,
        install_devices,
    ),
    ("GET", "/enterprise/{eid}/device/{id}/app/", LEGACY, device_apps_legacy),
    ("GET", "/enterprise/{eid}/device/{id}/download/eventfeed/", LEGACY, eventfeed),
    ("GET", "/commands/v0/commands/", V2, commands_list),
    ("GET", "/commands/v0/commands/{id}/", V2, command_detail),
    ("GET", "/commands/v0/commands/{id}/stats/", V2, command_stats),
    ("GET", "/commands/v0/status/", V2, statuses_list),
    ("GET", "/commands/v0/status/{id}/", V2, status_detail),
    ("GET", "/v0/operations/", V2, operations_list),
    ("GET", "/v0/operations/{id}/", V2, operation_detail),
    ("GET", "/v0/operations/{id}/devices/", V2, operation_devices),
    ("GET", "/v2/enterprise/{eid}/report/status-metrics", V2, status_metrics),
    ("POST", "/data-tap/v0/queries", REPORTS, datatap_create),
    ("GET", "/data-tap/v0/queries/{id}", REPORTS, datatap_get),
)
