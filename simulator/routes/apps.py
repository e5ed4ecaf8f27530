"""App routes: the v2 tenant apps (Apple, Windows), the legacy and v1 Android application
catalogue with versions and install lists, and the apps installed on a device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.http import LEGACY, V2, ApiError, Req, check_uuid
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import (
    Body,
    content_list,
    find_device,
    legacy_list,
    v2_list,
)
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.wire.base import Record


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
    i = find_device(w, req.params["id"])
    f = w.fleet
    entries = f.apps[i] if f.platform(i) == C.ANDROID else []
    pkg = req.query.get("package_name")
    if pkg:
        entries = [e for e in entries if f.legacy_apps[e[0]].package == pkg]
    return 200, legacy_list(req, entries, lambda e: w.wire.device_app_legacy(i, e))


_V2_APP_TYPES = ("VPP", "TENANT_IOS", "ESPER_IOS", "WEBCLIP", "ESPER_WINDOWS", "TENANT_WINDOWS")


def device_apps_v2(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/devices/{id}/device-apps/ (Apple and Windows installed apps)."""
    i = find_device(w, req.params["id"])
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


def truth_tenant_apps(w: World) -> list[Record]:
    """Every tenant app (v2)."""
    return [w.wire.tenant_app(k) for k in range(len(w.fleet.tenant_apps))]


def truth_tenant_app_versions(w: World) -> list[Record]:
    """Every version of every tenant app."""
    f = w.fleet
    return [
        w.wire.tenant_app_version(k, v)
        for k in range(len(f.tenant_apps))
        for v in range(len(f.tenant_apps[k].versions))
    ]


def truth_applications(w: World) -> list[Record]:
    """Every application of the legacy (Android) catalogue."""
    return [w.wire.application(k) for k in range(len(w.fleet.legacy_apps))]


def truth_application_versions(w: World) -> list[Record]:
    """Every version of every legacy application, with its ``application_id``."""
    out = []
    for k, app in enumerate(w.fleet.legacy_apps):
        for v in range(len(app.versions)):
            rec = w.wire.application_version(k, v)
            rec["application_id"] = app.id
            out.append(rec)
    return out


def truth_device_apps(w: World) -> list[Record]:
    """Every app installed on every live device, with its ``device_id`` and the route read."""
    f = w.fleet
    out = []
    for i in f.live():
        route = "legacy" if f.platform(i) == C.ANDROID else "v2"
        for rec in w.installed(i):
            rec["device_id"] = f.ids[i]
            rec["route"] = route
            out.append(rec)
    return out


AREA = Area(
    routes=(
        Route("GET", "/v2/tenant-apps", V2, tenant_apps),
        Route("GET", "/v2/tenant-apps/{id}", V2, tenant_app_detail),
        Route("GET", "/v2/tenant-apps/{id}/versions", V2, tenant_app_versions),
        Route("GET", "/v2/devices/{id}/device-apps/", V2, device_apps_v2),
        Route("GET", "/v2/device-apps", V2, device_apps_by_version),
        Route("GET", "/enterprise/{eid}/application/", LEGACY, applications),
        Route("GET", "/enterprise/{eid}/application/{id}/", LEGACY, application_detail),
        Route("GET", "/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions),
        Route(
            "GET",
            "/enterprise/{eid}/application/{id}/version/{vid}/",
            LEGACY,
            application_version_detail,
        ),
        Route("GET", "/v1/enterprise/{eid}/application/", LEGACY, applications_v1),
        Route("GET", "/v1/enterprise/{eid}/application/{id}/", LEGACY, application_detail_v1),
        Route(
            "GET", "/v1/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions_v1
        ),
        Route(
            "GET",
            "/v1/enterprise/{eid}/application/{id}/version/{vid}/",
            LEGACY,
            application_version_detail_v1,
        ),
        Route(
            "GET",
            "/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
            LEGACY,
            install_devices,
        ),
        Route(
            "GET",
            "/v1/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
            LEGACY,
            install_devices,
        ),
        Route("GET", "/enterprise/{eid}/device/{id}/app/", LEGACY, device_apps_legacy),
    ),
    truth={
        "tenant_apps": truth_tenant_apps,
        "tenant_app_versions": truth_tenant_app_versions,
        "applications": truth_applications,
        "application_versions": truth_application_versions,
        "device_apps": truth_device_apps,
    },
)
