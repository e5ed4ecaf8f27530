"""The simulated clock: changes bump updated_at, statuses move forward, rollouts progress."""

from __future__ import annotations

import itertools
from datetime import timedelta
from email.utils import parsedate_to_datetime

from esper_warehouse.simulator import Simulator
from esper_warehouse.simulator.catalog import CMD_TRANSITIONS, COMMAND_STATES

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED
from tests.simulator.conftest import make_client

LEGAL = {COMMAND_STATES[a]: {COMMAND_STATES[b] for b in bs} for a, bs in CMD_TRANSITIONS.items()}


def _reachable(a: str, b: str) -> bool:
    todo, seen = [a], set()
    while todo:
        s = todo.pop()
        for n in LEGAL.get(s, ()):
            if n == b:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


def test_date_header_carries_simulated_time(sim):
    with make_client(sim) as c:
        before = parsedate_to_datetime(c.get("/v2/devices/").headers["date"])
        assert before == sim.now
        sim.advance(hours=30)
        after = parsedate_to_datetime(c.get("/v2/devices/").headers["date"])
    assert after - before == timedelta(hours=30)
    assert sim.now == after


def test_advance_changes_devices_and_bumps_updated_at(sim):
    before = {d["id"]: d for d in sim.truth("devices")}
    sim.advance(hours=24 * 7)
    after = {d["id"]: d for d in sim.truth("devices")}
    changed = 0
    for did, rec in after.items():
        old = before.get(did)
        if old is None:
            continue
        strip = {"last_seen"}  # telemetry: moves without counting as a change
        if {k: v for k, v in rec.items() if k not in strip} != {
            k: v for k, v in old.items() if k not in strip
        }:
            changed += 1
            assert rec["updated_at"] > old["updated_at"], did
        else:
            assert rec["updated_at"] == old["updated_at"]
    assert changed > 0
    now = sim.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert all(d["updated_at"] <= now for d in after.values())


def test_command_statuses_move_forward_through_legal_transitions(sim):
    seen: dict[str, list[str]] = {}
    for _ in range(8):
        for st in sim.truth("command_statuses"):
            hist = seen.setdefault(st["id"], [])
            if not hist or hist[-1] != st["state"]:
                hist.append(st["state"])
        sim.advance(hours=6)
    moved = 0
    for hist in seen.values():
        for a, b in itertools.pairwise(hist):
            assert _reachable(a, b), f"illegal {a} -> {b}"
            moved += 1
    assert moved > 0
    finals = {st["state"] for st in sim.truth("command_statuses")}
    assert "Command Success" in finals and len(finals) > 2


def test_rollouts_progress(sim):
    def versions() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rec in sim.truth("device_apps"):
            out.setdefault(rec["device_id"], set()).add(
                rec.get("version_code") or rec["app_version_id"]
            )
        return out

    n_versions = len(sim.truth("application_versions")) + len(sim.truth("tenant_app_versions"))
    n_bp = len(sim.truth("blueprint_versions"))
    before = versions()
    sim.advance(hours=24 * 21)
    after = versions()
    assert (
        len(sim.truth("application_versions"))
        + len(sim.truth("tenant_app_versions"))
        + len(sim.truth("blueprint_versions"))
        > n_versions + n_bp
    ), "new versions were published"
    assert sum(before.get(d) != v for d, v in after.items()) > 0, "devices moved to new versions"


def test_truth_matches_what_routes_serve(sim):
    sim.advance(hours=48)
    with make_client(sim) as c:
        served = []
        cursor = "start"
        while cursor:
            body = c.get("/v2/devices/", params={"cursor": cursor, "limit": 50}).json()["content"]
            served += body["results"]
            cursor = body["next_cursor"]
        truth = sim.truth("devices")  # detail records: the list item plus detail-only fields
        assert [d["id"] for d in served] == [d["id"] for d in truth]
        for item, detail in zip(served, truth, strict=True):
            assert c.get(f"/v2/devices/{item['id']}").json()["content"] == detail
            for key, value in item.items():  # the detail repeats the item, nested objects grown
                if isinstance(value, dict):
                    for k, v in value.items():
                        if v is not None and not isinstance(v, dict):
                            assert detail[key][k] == v, (key, k)
                else:
                    assert detail[key] == value, key
        ops = c.get("/v0/operations/", params={"limit": 1000, "ordering": "created_at"}).json()
        truth_ops = {o["id"]: o for o in sim.truth("operations")}
        assert {o["id"]: o for o in ops["content"]["results"]} == truth_ops
        events = {e["id"]: e for e in sim.truth("device_events")}
        device = sim.truth("devices")[0]["id"]
        feed = c.get(
            f"/enterprise/{ENTERPRISE_ID}/device/{device}/download/eventfeed/",
            params={"limit": 1000},
        )
        for e in feed.json()["results"]:
            assert {**e, "device_id": device} == events[e["id"]]
        apps = [a for a in sim.truth("device_apps") if a["device_id"] == device]
        route = apps[0]["route"] if apps else "legacy"
        url = (
            f"/enterprise/{ENTERPRISE_ID}/device/{device}/app/"
            if route == "legacy"
            else f"/v2/devices/{device}/device-apps/"
        )
        body = c.get(url, params={"limit": 1000}).json()
        got = body["results"] if route == "legacy" else body["content"]["results"]
        assert [{**a, "device_id": device, "route": route} for a in got] == apps
        http_truth = c.get(
            sim.base_url.removesuffix("/api") + "/_sim/truth/command_statuses"
        ).json()
        assert http_truth == sim.truth("command_statuses")


def test_events_only_on_activity(sim):
    """A device whose record did not change and that got no command/operation: no new events."""
    before = {d["id"]: d["updated_at"] for d in sim.truth("devices")}
    events_before = {e["id"] for e in sim.truth("device_events")}
    sim.advance(hours=24)
    active = {s["device"] for s in sim.truth("command_statuses")} | {
        p["device_id"] for p in sim.truth("operation_devices")
    }
    for e in sim.truth("device_events"):
        if e["id"] in events_before:
            continue
        d = e["device_id"]
        changed = next((x["updated_at"] for x in sim.truth("devices") if x["id"] == d), None)
        assert d in active or changed != before.get(d), f"event without activity on {d}"


def test_same_seed_same_fleet_and_evolution():
    kw = {"devices": 60, "seed": SEED, "api_key": API_KEY, "enterprise_id": ENTERPRISE_ID}
    a, b = Simulator(**kw), Simulator(**kw)
    for s in (a, b):
        s.advance(hours=50)
    for table in ("devices", "command_statuses", "operations", "device_events", "device_apps"):
        assert a.truth(table) == b.truth(table), table
    c = Simulator(**{**kw, "seed": SEED + 1})
    assert c.truth("devices") != a.truth("devices")


def test_control_routes(sim):
    import httpx

    root = sim.base_url.removesuffix("/api")
    with httpx.Client(base_url=root) as c:
        now = c.get("/_sim/now").json()["now"]
        advanced = c.post("/_sim/advance", params={"hours": 2}).json()["now"]
        assert advanced > now
        stats = c.get("/_sim/stats").json()
        assert set(stats) == {"total", "routes", "statuses"}
        assert c.post("/_sim/stats/reset").json()["total"] == 0
        assert c.get("/_sim/truth/nope").status_code == 404
