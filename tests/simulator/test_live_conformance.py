"""The simulator answers like the live Esper API, route by route (docs/spec/live-shapes.json).

For every live route the product calls, the simulator's answer must be shape-compatible with
what the real API answered: every key the live answer had is there, with the same JSON type or
null (a null in the live sample matches any value: a sample of three rows is no proof of
"always null"). Keys the simulator adds beyond the live answer must be listed in `EXTRA_KEYS`
with the reason they exist; an unlisted extra key fails. This is the test that fails if someone
reverts a live fact: `previous` back on a v2 list, `results: []` for an empty v2 list, a patch
level on `/v2/devices/` list items, the spec's `security_path_level`, non-null `groups` on a
device command, and so on.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from esper_warehouse.pipelines.shapes import shape_of, shape_problems
from esper_warehouse.simulator import Simulator
from esper_warehouse.sources.esper.tables.access import USERS

from tests.conftest import ENTERPRISE_ID
from tests.live_shapes import document, route


def route_practice(name: str) -> list[str]:
    """The fields Esper's own client reads (live-shapes.json `client_practice.fields_read`)."""
    return document()["client_practice"]["fields_read"][name]


EID = ENTERPRISE_ID

# (live path template, simulator URL builder) for each live route the product calls.
# The live samples describe one Android device, so the device routes are asked about one.
ROUTES: dict[str, Any] = {
    "/v2/devices/": lambda ids: "/v2/devices/?limit=3&offset=0&platform=ANDROID",
    "/v2/devices/{id}": lambda ids: f"/v2/devices/{ids['android']}",
    "/enterprise/{enterprise_id}/device/": lambda ids: (
        f"/enterprise/{EID}/device/?limit=3&offset=0&serial={ids['android_serial']}"
    ),
    "/enterprise/{enterprise_id}/device/{device_id}/": lambda ids: (
        f"/enterprise/{EID}/device/{ids['android']}/"
    ),
    "/enterprise/{enterprise_id}/device/{device_id}/app/": lambda ids: (
        f"/enterprise/{EID}/device/{ids['android']}/app/?limit=3&offset=0"
    ),
    # Live: the same Android device on the v2 route, an empty list.
    "/v2/devices/{deviceId}/device-apps/": lambda ids: (
        f"/v2/devices/{ids['android']}/device-apps/?limit=3&offset=0"
    ),
    "/v2/tenant-apps": lambda ids: "/v2/tenant-apps?limit=3&offset=0",
    "/enterprise/{enterprise_id}/application/": lambda ids: (
        f"/enterprise/{EID}/application/?limit=3&offset=0"
    ),
    "/v1/enterprise/{enterprise_id}/application/": lambda ids: (
        f"/v1/enterprise/{EID}/application/?limit=3&offset=0"
    ),
    "/v1/enterprise/{enterprise_id}/application/{application_id}/": lambda ids: (
        f"/v1/enterprise/{EID}/application/{ids['app_unlisted']}/"
    ),
    # Live: an app the legacy routes miss has an empty legacy version list (results []).
    "/enterprise/{enterprise_id}/application/{application_id}/version/": lambda ids: (
        f"/enterprise/{EID}/application/{ids['app_unlisted']}/version/?limit=3&offset=0"
    ),
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/": lambda ids: (
        f"/v1/enterprise/{EID}/application/{ids['app_unlisted']}/version/?limit=3&offset=0"
    ),
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/": (
        lambda ids: (
            f"/v1/enterprise/{EID}/application/{ids['app_unlisted']}/version/"
            f"{ids['app_unlisted_version']}/"
        )
    ),
    "/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/installdevices": (
        lambda ids: (
            f"/enterprise/{EID}/application/{ids['app_unlisted']}/version/"
            f"{ids['app_unlisted_version']}/installdevices?limit=3&offset=0"
        )
    ),
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/installdevices": (
        lambda ids: (
            f"/v1/enterprise/{EID}/application/{ids['app_unlisted']}/version/"
            f"{ids['app_unlisted_version']}/installdevices?limit=3&offset=0"
        )
    ),
    "/enterprise/{enterprise_id}/device/{device_id}/download/eventfeed/": lambda ids: (
        f"/enterprise/{EID}/device/{ids['android']}/download/eventfeed/?limit=3&offset=0"
    ),
    "/commands/v0/commands/": lambda ids: (
        f"/commands/v0/commands/?devices={ids['commanded']}&limit=3&offset=0"
    ),
    "/commands/v0/status/": lambda ids: (
        f"/commands/v0/status/?request={ids['request']}&limit=3&offset=0"
    ),
    "/v2/enterprise/{enterprise_id}/report/status-metrics": lambda ids: (
        f"/v2/enterprise/{EID}/report/status-metrics"
    ),
    # Live: one user asked about by its legacy id, on both routes.
    "/user/{user_id}/": lambda ids: f"/user/{ids['legacy_user']}/",
    USERS.path: lambda ids: f"/authn2/v1/users/?legacy_user_id={ids['legacy_user']}",
}

# Keys the simulator serves beyond the live sample, each with its reason. A path is the key's
# place in the answer (`[]` = any list item).
EXTRA_KEYS: dict[str, dict[str, str]] = {
    "/v2/devices/": {
        "content.results[].created_by": "spec AndroidDeviceV2 (created_by/updated_by)",
        "content.results[].updated_by": "spec AndroidDeviceV2 (created_by/updated_by)",
        "content.results[].hardware_info.hardware": "live detail (route 12) has it",
        "content.results[].network_info.network_type": "spec NetworkInfo",
        "content.results[].memory_info.units": "spec MemoryInfo",
    },
    "/v2/devices/{id}": {
        "content.created_by": "spec AndroidDeviceV2",
        "content.updated_by": "spec AndroidDeviceV2",
        "content.battery_stats.battery_level": "live list items (route 15) carry it",
        "content.network_info.network_type": "spec NetworkInfo",
        "content.memory_info.units": "spec MemoryInfo",
        "content.template_name": "live list items (route 15) carry it",
        "content.policy": "live list items (route 15) carry it",
        "content.network_stats.current_active_connection": "live list items (route 15) carry it",
        "content.network_stats.ip_address": "live list items (route 15) carry it",
    },
    "/enterprise/{enterprise_id}/device/": {},
    "/enterprise/{enterprise_id}/device/{device_id}/": {},
    "/enterprise/{enterprise_id}/device/{device_id}/app/": {},
    "/v2/devices/{deviceId}/device-apps/": {},
    "/v2/tenant-apps": {},
    "/enterprise/{enterprise_id}/application/": {},
    "/v1/enterprise/{enterprise_id}/application/": {},
    "/v1/enterprise/{enterprise_id}/application/{application_id}/": {},
    "/enterprise/{enterprise_id}/application/{application_id}/version/": {},
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/": {},
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/": {},
    "/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/installdevices": {},
    "/v1/enterprise/{enterprise_id}/application/{application_id}/version/{version_id}/installdevices": {},
    "/enterprise/{enterprise_id}/device/{device_id}/download/eventfeed/": {},
    "/commands/v0/commands/": {},
    "/commands/v0/status/": {},
    "/v2/enterprise/{enterprise_id}/report/status-metrics": {},
    "/user/{user_id}/": {},
    USERS.path: {},
}


@pytest.fixture(scope="module")
def ids(shared_sim: Simulator, client: httpx.Client) -> dict[str, str]:
    devices = shared_sim.truth("devices")
    android = next(d for d in devices if d["platform"] == "ANDROID" and d.get("state") == 1)
    statuses = shared_sim.truth("command_statuses")
    requests = {c["id"]: c for c in shared_sim.truth("command_requests")}
    device_command = next(c for c in requests.values() if c["command_type"] == "DEVICE")
    # an app the legacy list misses (live §11), found by comparing the two lists
    legacy = client.get(f"/enterprise/{EID}/application/?limit=1000").json()["results"]
    listed = {a["id"] for a in legacy}
    unlisted = next((a for a in shared_sim.truth("applications") if a["id"] not in listed), None)
    assert unlisted, "live §11: the legacy application list misses apps that v1 serves"
    return {
        "app_unlisted": unlisted["id"],
        "app_unlisted_version": unlisted["versions"][-1]["id"],
        "android": android["id"],
        "android_serial": android["serial"],
        "commanded": device_command["devices"][0],
        "request": statuses[0]["request"],
        "legacy_user": str(shared_sim.truth("users")[0]["legacy_user_id"]),
    }


@pytest.mark.parametrize("path", list(ROUTES))
def test_the_simulator_answers_like_the_live_api(
    client: httpx.Client, ids: dict[str, str], path: str
) -> None:
    recorded = route("GET", path)
    answer = client.get(ROUTES[path](ids))
    assert answer.status_code == recorded["status"], answer.text[:300]
    extras: list[str] = []
    problems = shape_problems(recorded["observed"], shape_of(answer.json()), "", extras)
    assert not problems, f"{path} differs from the live answer (route {recorded['n']}): {problems}"
    allowed = EXTRA_KEYS[path]
    unlisted = sorted({e.lstrip(".") for e in extras} - set(allowed))
    assert not unlisted, f"{path}: keys the live answer lacks, not justified: {unlisted}"


def test_an_empty_v2_list_is_results_null(client: httpx.Client, ids: dict[str, str]) -> None:
    """Live §2: count 0, next and prev null, results null (not [])."""
    body = client.get(f"/v2/devices/{ids['android']}/device-apps/").json()
    assert body == {"content": {"count": 0, "next": None, "prev": None, "results": None}}


def test_device_list_items_carry_no_patch_level_and_the_detail_does(
    client: httpx.Client, ids: dict[str, str]
) -> None:
    """Live §4: the patch level is on the detail and the legacy routes, never on list items."""
    items = client.get("/v2/devices/?limit=50&platform=ANDROID").json()["content"]["results"]
    assert items and all(
        "security_patch_level" not in i["software_info"]
        and "os_build_number" not in i["software_info"]
        and "security_path_level" not in i["software_info"]
        for i in items
    )
    detail = client.get(f"/v2/devices/{ids['android']}").json()["content"]["software_info"]
    legacy = client.get(f"/enterprise/{EID}/device/{ids['android']}/").json()["softwareInfo"]
    assert detail["security_patch_level"] == legacy["securityPatchLevel"]
    assert detail["os_build_number"] == legacy["androidBuildNumber"]


def test_unset_command_fields_are_null(client: httpx.Client, ids: dict[str, str]) -> None:
    """Live route 27: a device command has `groups`, `reason`, `schedule_args`, `alias` null, and
    the list says `prev` inside `{code, message, content}`."""
    body = client.get(f"/commands/v0/commands/?devices={ids['commanded']}").json()
    assert set(body) == {"code", "message", "content"}
    assert set(body["content"]) == {"count", "next", "prev", "results"}
    device_commands = [c for c in body["content"]["results"] if c["command_type"] == "DEVICE"]
    assert device_commands
    for command in device_commands:
        assert command["groups"] is None and command["reason"] is None
        assert command["alias"] is None
        if command["schedule"] == "IMMEDIATE":
            assert command["schedule_args"] is None


def test_apple_devices_list_store_apps_missing_from_tenant_apps(
    client: httpx.Client, shared_sim: Simulator
) -> None:
    """Live §9-10: App Store (VPP) and Esper (ESPER_IOS) apps are on Apple devices but in no
    tenant app list; Esper's own tool reads them by `bundle_id` and `apple_app_version`."""
    fields = route_practice("apple_app")
    tenant_packages = {
        a["package_name"]
        for a in client.get("/v2/tenant-apps?limit=1000").json()["content"]["results"]
    }
    apple = [d for d in shared_sim.truth("devices") if d["platform"] == "APPLE"]
    seen_types: set[str] = set()
    for device in apple:
        body = client.get(f"/v2/devices/{device['id']}/device-apps/?limit=250").json()
        for item in body["content"]["results"] or []:
            assert set(fields) <= set(item), item
            assert isinstance(item["bundle_id"], str) and isinstance(item["apple_app_version"], str)
            if item["app_type"] in ("VPP", "ESPER_IOS"):
                seen_types.add(item["app_type"])
                assert item["bundle_id"] not in tenant_packages
                assert item["app_id"] is None
    assert seen_types == {"VPP", "ESPER_IOS"}, "live §9: Apple app types VPP and ESPER_IOS"


def test_the_legacy_application_routes_miss_apps_v1_serves(
    client: httpx.Client, ids: dict[str, str]
) -> None:
    """Live §11: the legacy list counted fewer apps than v1 (424 vs 752); its item routes
    answered 404 with the live body (note the trailing space) for an id v1 served; the legacy
    version list of that app was empty (`results: []`, route 5)."""
    legacy = client.get(f"/enterprise/{EID}/application/?limit=1000").json()
    v1 = client.get(f"/v1/enterprise/{EID}/application/?limit=1000").json()
    assert 0 < legacy["count"] < v1["count"]
    assert {a["id"] for a in legacy["results"]} < {a["id"] for a in v1["results"]}
    assert ids["app_unlisted"] not in {a["id"] for a in legacy["results"]}
    not_found = {"errors": ["detail: Not found."], "message": "detail: Not found. ", "status": 404}
    base = f"/enterprise/{EID}/application/{ids['app_unlisted']}/"
    for url in (base, f"{base}version/{ids['app_unlisted_version']}/"):
        answer = client.get(url)
        assert (answer.status_code, answer.json()) == (404, not_found), url
    versions = client.get(f"{base}version/").json()
    assert versions == {"count": 0, "next": None, "previous": None, "results": []}


def test_a_status_without_a_reason_says_null(client: httpx.Client) -> None:
    """Live route 29 (§6): `reason` null in status items; the subset types it a string ("details
    briefing the reason for current command state"), so a failure says why."""
    commands = client.get("/commands/v0/commands/", params={"limit": 1000}).json()
    statuses = []
    for command in commands["content"]["results"][:40]:
        page = client.get("/commands/v0/status/", params={"request": command["id"], "limit": 1000})
        statuses += page.json()["content"]["results"]
    assert statuses
    assert any(s["reason"] is None for s in statuses), "live route 29: reason null"
    assert all(s["reason"] is None or isinstance(s["reason"], str) for s in statuses)
    assert all(s["reason"] is None for s in statuses if s["state"] == "Command Success")
    assert all(s["reason"] for s in statuses if s["state"] == "Command Failure")


def test_the_legacy_device_list_pages_and_filters(client: httpx.Client) -> None:
    """The legacy device list (live route 14: legacy-list, §1) pages by limit/offset to its
    `count` with absolute links (§12), and filters by `group`, `brand` and `name` as the subset
    documents them ("including the subgroups" for `group`)."""
    url = f"/enterprise/{EID}/device/"
    first = client.get(url, params={"limit": 250}).json()
    assert len(first["results"]) == min(250, first["count"])
    rest = client.get(first["next"]).json()
    ids = [d["id"] for d in first["results"] + rest["results"]]
    assert len(ids) == len(set(ids)) == first["count"] and rest["next"] is None
    device = next(d for d in first["results"] if d["groups"])
    group = device["groups"][0].rstrip("/").rsplit("/", 1)[-1]
    by_group = client.get(url, params={"group": group, "limit": 1000}).json()["results"]
    assert device["id"] in {d["id"] for d in by_group}
    brand = device["hardwareInfo"]["brand"]
    by_brand = client.get(url, params={"brand": brand, "limit": 1000}).json()["results"]
    assert by_brand and all(d["hardwareInfo"]["brand"] == brand for d in by_brand)
    part = device["device_name"][2:6]
    by_name = client.get(url, params={"name": part, "limit": 1000}).json()["results"]
    assert device["id"] in {d["id"] for d in by_name}
    assert all(part.lower() in d["device_name"].lower() for d in by_name)


def test_the_route_table_names_every_served_route() -> None:
    """docs/spec/README.md says, per served route, its envelope and whether it is live-backed."""
    from pathlib import Path

    from esper_warehouse.simulator.routes import ROUTES as SERVED

    table = (Path(__file__).resolve().parents[2] / "docs" / "spec" / "README.md").read_text()
    missing = [t for _m, t, _f, _h in SERVED if t not in table]
    assert not missing, f"routes missing from docs/spec/README.md: {missing}"


def test_installdevices_lists_the_devices_on_that_version(client: httpx.Client) -> None:
    """Routes 9/10 ("version installations" in live-shapes.json): the devices that have that
    version installed, as their own installed-app lists (route 16, Android: §9, §21) say. Both
    sides are API answers, so the check holds for a real tenant too."""
    devices = client.get(f"/enterprise/{EID}/device/", params={"limit": 1000}).json()["results"]
    installed: dict[tuple[str, str], set[str]] = {}
    for device in devices:
        apps = client.get(f"/enterprise/{EID}/device/{device['id']}/app/", params={"limit": 1000})
        for app in apps.json()["results"]:
            installed.setdefault((app["package_name"], app["version_code"]), set()).add(
                device["id"]
            )
    base = f"/v1/enterprise/{EID}/application/"
    checked = 0
    for app in client.get(base, params={"limit": 1000}).json()["results"]:
        versions = client.get(f"{base}{app['id']}/version/", params={"limit": 1000}).json()
        for version in versions["results"]:
            url = f"{base}{app['id']}/version/{version['id']}/installdevices"
            served = {d["id"] for d in client.get(url, params={"limit": 1000}).json()["results"]}
            expected = installed.get((app["package_name"], version["version_code"]), set())
            assert served == expected, (app["package_name"], version["version_code"])
            checked += bool(expected)
    assert checked >= 5


def test_a_device_in_no_group(client: httpx.Client) -> None:
    """Live routes 11/12/14/15/9 (§4): a device in no group has `group_id` null on v2, `groups: []`
    on the legacy routes and `group_name` null in installdevices; the rest carry their group."""
    devices = client.get("/v2/devices/", params={"limit": 1000}).json()["content"]["results"]
    ungrouped = {d["id"] for d in devices if d["group_id"] is None}
    lone = next(d for d in devices if d["group_id"] is None)
    assert lone["platform"] == "ANDROID", "live: the device in no group was an Android device"
    legacy = client.get(f"/enterprise/{EID}/device/{lone['id']}/").json()
    assert legacy["groups"] == [], "live route 11: groups [] for a device in no group"
    grouped = next(d for d in devices if d["group_id"] is not None)
    assert (
        client.get(f"/enterprise/{EID}/device/{grouped['id']}/")
        .json()["groups"][0]
        .endswith(f"/devicegroup/{grouped['group_id']}/")
    )
    base = f"/enterprise/{EID}/application/"
    app = client.get(base, params={"limit": 1}).json()["results"][0]
    seen = 0
    for version in app["versions"]:
        url = f"{base}{app['id']}/version/{version['id']}/installdevices"
        for d in client.get(url, params={"limit": 1000}).json()["results"]:
            assert (d["group_name"] is None) == (d["id"] in ungrouped), f"live route 9: {d}"
            seen += d["id"] in ungrouped
    assert seen, "a device in no group is among the installations"
