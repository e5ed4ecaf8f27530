"""The simulated clock: changes bump updated_at, statuses move forward, rollouts progress."""

from __future__ import annotations

from datetime import timedelta
from email.utils import parsedate_to_datetime

from esper_warehouse.pipelines.shapes import openapi_document
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED
from tests.simulator.conftest import make_client

COMMAND_STATUS = openapi_document()["components"]["schemas"]["CommandStatus"]
COMMAND_STATES = set(COMMAND_STATUS["properties"]["state"]["enum"])


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


def test_command_statuses_move_forward_in_the_documented_states(sim):
    """The clock walks statuses forward (its docstring): a status never returns to a state it
    left, and several states are reached. Every state is one of the OpenAPI subset's
    `CommandStatus.state` (live route 29: `state` is a string)."""
    seen: dict[str, list[str]] = {}
    for _ in range(8):
        for st in sim.truth("command_statuses"):
            hist = seen.setdefault(st["id"], [])
            if not hist or hist[-1] != st["state"]:
                hist.append(st["state"])
        sim.advance(hours=6)
    states = {s for hist in seen.values() for s in hist}
    assert states <= COMMAND_STATES, (
        f"not in the subset's CommandStatus enum: {states - COMMAND_STATES}"
    )
    assert all(len(hist) == len(set(hist)) for hist in seen.values()), "a status went back"
    assert sum(len(hist) - 1 for hist in seen.values()) > 0, "the clock moved no status"
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
        assert c.get("/_sim/truth/command_statuses").json() == sim.truth("command_statuses")
        assert c.get("/_sim/truth/nope").status_code == 404


def test_every_area_declares_its_routes_and_truth_once(sim):
    # One registry: each `simulator/routes/<area>.py` declares its routes and the truth of the
    # tables they feed (`AREA`); `sim.truth` and `/_sim/truth` know exactly those tables.
    from esper_warehouse.simulator.routes import AREAS, ROUTES, truth_tables

    declared = [table for area in AREAS.values() for table in area.truth]
    assert len(declared) == len(set(declared))
    assert list(truth_tables()) == declared
    assert {"geofences", "users", "apns_certificates", "devices", "status_metrics"} <= set(declared)
    for table in declared:
        assert isinstance(sim.truth(table), list), table
    lines = [(r.method, r.path) for r in ROUTES]
    assert len(lines) == len(set(lines))
    assert lines == [(r.method, r.path) for area in AREAS.values() for r in area.routes]
