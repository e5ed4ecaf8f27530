"""The v2 app catalogue (`GET /v2/apps`, live route 18): one item per version of a tenant app,
keyed by `app_id` and `app_version_id`, in the v2 list envelope. The area whole: records, route,
truth.
"""

from __future__ import annotations

from esper_warehouse.simulator.http import V2, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, v2_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import iso


def v2_apps(w: World) -> list[dict]:
    """Every version of every tenant app, as live route 18 shapes it."""
    f = w.fleet
    return [
        {
            "app_id": a.id,
            "app_type": a.kind,
            "app_version_id": ver.id,
            "build_number": str(ver.number),
            "created_at": iso(ver.created),
            "created_by": f.users[0],
            "description": a.name,
            "file_size_in_kb": 20_000 + 731 * ver.number,
            "icon_url": f"https://cdn.example/icons/{a.package}.png",
            "is_full_screen": False,
            "is_removable": True,
            "label": a.name,
            "min_sdk_version": "13.0",
            "name": a.name,
            "package_name": a.package,
            "release_notes": f"{a.name} {ver.name}",
            "tenant_id": f.tenant_id,
            "updated_at": iso(ver.updated),
            "updated_by": f.users[0],
            "url": f"https://cdn.example/apps/{a.package}/{ver.name}",
            "version_name": ver.name,
        }
        for a in f.tenant_apps
        for ver in a.versions
    ]


def app_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/apps: `{content: {count, next, prev, results}}`."""
    items = v2_apps(w)
    return 200, v2_list(req, list(range(len(items))), lambda k: items[k])


AREA = Area(routes=(Route("GET", "/v2/apps", V2, app_list),), truth={"v2_apps": v2_apps})
