"""Each fault appears as configured, and only where configured (route glob, times, probability)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from esper_warehouse.simulator import Simulator
from esper_warehouse.simulator.faults import KINDS
from esper_warehouse.sources.esper.tables.credentials import APNS_CERTIFICATES

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.simulator.conftest import make_client


def test_status_fault_only_on_matching_route_and_times(sim):
    sim.set_faults([{"kind": "status", "status": 503, "route": "/v2/devices/*", "times": 2}])
    with make_client(sim) as c:
        device = sim.truth("devices")[0]["id"]
        assert c.get(f"/v2/devices/{device}").status_code == 503
        other = c.get("/v0/operations/")
        assert other.status_code == 200
        second = c.get(f"/v2/devices/{device}")
        assert second.status_code == 503
        assert second.json()["code"] == 503
        assert c.get(f"/v2/devices/{device}").status_code == 200  # times exhausted
    assert sim.stats()["statuses"]["503"] == 2


def test_probability_is_seeded_and_partial(sim):
    sim.set_faults(
        [{"kind": "status", "status": 500, "route": "/v0/operations/", "probability": 0.5}]
    )
    with make_client(sim) as c:
        codes = [c.get("/v0/operations/").status_code for _ in range(60)]
    assert 10 < codes.count(500) < 50
    assert set(codes) == {200, 500}


def test_rate_limit_with_and_without_retry_after(sim):
    sim.set_faults(
        [{"kind": "rate_limit", "rps": 2, "burst": 3, "retry_after": True, "route": "/v0/*"}]
    )
    with make_client(sim) as c:
        codes = [c.get("/v0/operations/") for _ in range(6)]
        assert [r.status_code for r in codes[:3]] == [200, 200, 200]
        limited = [r for r in codes if r.status_code == 429]
        assert limited and all(int(r.headers["retry-after"]) >= 1 for r in limited)
        assert c.get("/commands/v0/commands/").status_code == 200  # other routes untouched
        sim.set_faults([{"kind": "rate_limit", "rps": 1, "burst": 1, "retry_after": False}])
        c.get("/v0/operations/")
        r = c.get("/v0/operations/")
        assert r.status_code == 429 and "retry-after" not in r.headers
        time.sleep(1.1)
        assert c.get("/v0/operations/").status_code == 200  # bucket refilled


def test_latency_slow_drop_and_malformed(sim):
    with make_client(sim) as c:
        sim.set_faults([{"kind": "latency", "ms": 150, "jitter_ms": 20, "route": "/v0/*"}])
        t = time.perf_counter()
        c.get("/v0/operations/")
        assert time.perf_counter() - t >= 0.12
        t = time.perf_counter()
        c.get("/commands/v0/commands/")
        assert time.perf_counter() - t < 0.12

        sim.set_faults([{"kind": "slow", "seconds": 1.0, "route": "/v0/*", "times": 1}])
        with pytest.raises(httpx.ReadTimeout):
            c.get("/v0/operations/", timeout=0.3)

        sim.set_faults([{"kind": "drop", "route": "/v0/*", "times": 1}])
        with pytest.raises(httpx.TransportError):
            c.get("/v0/operations/")
        assert c.get("/v0/operations/").status_code == 200

        sim.set_faults([{"kind": "malformed", "route": "/v0/*", "times": 1}])
        bad = c.get("/v0/operations/")
        assert bad.status_code == 200
        with pytest.raises(ValueError):
            bad.json()
        assert c.get("/v0/operations/").json()["content"]["count"] >= 0


def test_insert_during_offset_paging_shifts_pages(sim):
    before = len(sim.truth("devices"))
    sim.set_faults(
        [{"kind": "insert_during_paging", "count": 3, "route": "/v2/devices/", "times": 1}]
    )
    with make_client(sim) as c:
        ids, url, params = [], "/v2/devices/", {"limit": 40}
        while url:
            body = c.get(url, params=params).json()["content"]
            ids += [d["id"] for d in body["results"]]
            url, params = body["next"], None
        # three devices enrolled at the head while paging: the client sees repeats
        assert len(ids) - len(set(ids)) == 3
        assert len(sim.truth("devices")) == before + 3
        cursor_ids, cursor = [], "start"
        while cursor:
            body = c.get("/v2/devices/", params={"cursor": cursor, "limit": 40}).json()["content"]
            cursor_ids += [d["id"] for d in body["results"]]
            cursor = body["next_cursor"]
        assert len(cursor_ids) == len(set(cursor_ids)) == before + 3


def test_constructor_latency_and_rate_limit():
    with (
        Simulator(
            devices=20,
            seed=3,
            api_key=API_KEY,
            enterprise_id=ENTERPRISE_ID,
            latency_ms=100,
            rate_limit=2,
        ) as s,
        make_client(s) as c,
    ):
        t = time.perf_counter()
        codes = [c.get("/v0/operations/").status_code for _ in range(8)]
        assert time.perf_counter() - t >= 0.6
        assert 429 in codes
        s.clear_faults()
        assert all(c.get("/v0/operations/").status_code == 200 for _ in range(10))


def test_http_fault_control(sim):
    root = sim.base_url.removesuffix("/api")
    with httpx.Client(base_url=root) as ctl, make_client(sim) as c:
        assert ctl.post("/_sim/faults", json=[{"kind": "status", "status": 502}]).status_code == 200
        assert c.get("/v0/operations/").status_code == 502
        assert ctl.post("/_sim/faults", json=[{"kind": "nope"}]).status_code == 400
        assert ctl.delete("/_sim/faults").status_code == 200
        assert c.get("/v0/operations/").status_code == 200


def _readme_faults() -> str:
    """docs/simulator.md's paragraph on the simulator's faults, through its example block."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    start = readme.index("**Faults** (`simulator/faults.py`)")
    return readme[start : readme.index("From Python:", start)]


def test_the_simulator_page_documents_every_fault_kind_and_its_example_runs(sim):
    """docs/simulator.md's table has a row for each kind `parse` accepts (`faults.KINDS`), and its example
    does what it says against a running simulator: the faults are set, listed, act, and go."""
    text = _readme_faults()
    assert set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE)) == KINDS
    (block,) = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    posted = json.loads(re.search(r"-d '(.*?)'", block, re.DOTALL).group(1))
    assert "POST" in block and "DELETE" in block and block.count("/_sim/faults") == 3
    root = sim.base_url.removesuffix("/api")
    with httpx.Client(base_url=root) as ctl, make_client(sim) as c:
        assert ctl.post("/_sim/faults", json=posted).status_code == 200
        assert [f["kind"] for f in ctl.get("/_sim/faults").json()["faults"]] == [
            f["kind"] for f in posted
        ]
        assert c.get("/v2/blueprints/").status_code == 403
        assert ctl.delete("/_sim/faults").json() == {"faults": []}
        assert c.get("/v2/blueprints/").status_code == 200


def test_value_drift_serves_a_value_in_the_records_named(sim):
    """`value` drift: the field (a dotted path too) becomes the value in the records whose id is
    listed, in list answers and in bare arrays (role scopes) alike; other records are untouched."""
    devices = sorted(d["id"] for d in sim.truth("devices"))
    role = sim.truth("roles")[0]["id"]
    sim.set_faults(
        [
            {"kind": "drift", "variant": "value", "route": "/v2/devices/", "field": "last_seen",
             "value": "0000-00-00T00:00:00Z", "ids": devices[:2]},
            {"kind": "drift", "variant": "value", "route": APNS_CERTIFICATES.path,
             "field": "meta.cert_expiry_on", "value": "next spring"},
            {"kind": "drift", "variant": "value", "route": "/authz2/v1/roles/*/scopes",
             "field": "scope_type", "value": "ADMIN"},
        ]
    )  # fmt: skip
    with make_client(sim) as c:
        items = c.get("/v2/devices/", params={"limit": 1000}).json()["content"]["results"]
        certificates = c.get(APNS_CERTIFICATES.path).json()["content"]["results"]
        scopes = c.get(f"/authz2/v1/roles/{role}/scopes").json()
    odd = sorted(i["id"] for i in items if i.get("last_seen") == "0000-00-00T00:00:00Z")
    assert odd == devices[:2]
    assert len(items) == len(devices)
    assert {c["meta"]["cert_expiry_on"] for c in certificates} == {"next spring"}
    assert scopes and {s["scope_type"] for s in scopes} == {"ADMIN"}
    with pytest.raises(ValueError, match="value drift needs"):
        sim.set_faults([{"kind": "drift", "variant": "value", "field": "state"}])
