"""Esper Pipelines in the simulator: paging, errors and refusal as the spec says, and the life of
the runs over the simulated days (`simulator/dynamics/pipelines.py`).

The routes' shapes are validated in `test_conformance.py::test_pipeline_routes_validate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
from esper_warehouse.simulator import Simulator
from esper_warehouse.sources.esper.tables.pipelines import PIPELINE_RUNS, PIPELINES

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED
from tests.simulator.conftest import make_client
from tests.simulator.openapi import validate_pipelines

UNKNOWN = "00000000-0000-4000-8000-000000000000"
DAY = 86_400
RUNS = PIPELINE_RUNS.path
TERMINAL = {"success", "failure", "cancelled", "timeout", "invalid"}


def _at(text: str | None) -> float:
    assert text is not None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _all(client: httpx.Client, url: str, **params: object) -> list[dict]:
    """Every item of a list, following its `next` links."""
    items: list[dict] = []
    page = client.get(url, params={**params, "limit": 1000}).json()["content"]
    items += page["results"]
    while page["next"]:
        page = client.get(page["next"]).json()["content"]
        items += page["results"]
    return items


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """A fresh 200-device tenant at its start (the tests advance its clock)."""
    with Simulator(devices=200, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as s:
        yield s


@pytest.fixture
def api(sim: Simulator) -> Iterator[httpx.Client]:
    with make_client(sim) as c:
        yield c


def _stage_runs(client: httpx.Client, run: dict) -> list[dict]:
    return _all(client, f"{RUNS}{run['id']}/stageruns/")


def _target_runs(client: httpx.Client, stage_run: dict) -> list[dict]:
    return _all(client, f"/pipelines/v0/stageruns/{stage_run['id']}/targetruns/")


# -- the routes, as the spec says ---------------------------------------------------------


def test_target_runs_page_by_limit_and_offset_with_links_both_ways(client) -> None:
    """A stage run's target runs, 7 at a time: every one once, `next` and `previous` absolute
    links back and forth, none past the last page (the spec's `apps-envelope`)."""
    runs = _all(client, RUNS)
    stage_runs = [s for r in runs for s in _stage_runs(client, r)]
    counts = {
        s["id"]: client.get(f"/pipelines/v0/stageruns/{s['id']}/targetruns/").json()["content"]
        for s in stage_runs
    }
    biggest = max(counts, key=lambda k: counts[k]["count"])
    url = f"/pipelines/v0/stageruns/{biggest}/targetruns/"
    first = client.get(url, params={"limit": 7}).json()["content"]
    assert first["count"] > 14 and first["previous"] is None
    seen, page = [], first
    while True:
        seen += [t["id"] for t in page["results"]]
        if page["next"] is None:
            break
        assert page["next"].startswith(client.base_url.scheme + "://")
        following = client.get(page["next"]).json()["content"]
        back = client.get(following["previous"]).json()["content"]
        assert back["results"] == page["results"]
        page = following
    assert len(seen) == len(set(seen)) == first["count"]


def test_the_tenant_runs_are_every_pipelines_runs_and_filter_and_order_as_asked(client) -> None:
    """`/pipelines/v0/runs/` holds each pipeline's runs (`/pipelines/{id}/runs/`); `status`
    filters, `ordering` orders (the spec's parameters); the answers judge each other."""
    everyone = _all(client, RUNS)
    per_pipeline = [
        r
        for p in _all(client, PIPELINES.path)
        for r in _all(client, f"/pipelines/v0/pipelines/{p['id']}/runs/")
    ]
    assert sorted(r["id"] for r in everyone) == sorted(r["id"] for r in per_pipeline)
    for status in {r["status"] for r in everyone}:
        chosen = _all(client, RUNS, status=status)
        assert {r["id"] for r in chosen} == {r["id"] for r in everyone if r["status"] == status}
    numbers = [r["run_number"] for r in _all(client, RUNS, ordering="-run_number")]
    assert numbers == sorted(numbers, reverse=True)
    name = everyone[0]["pipeline_name"]
    assert {r["pipeline_name"] for r in _all(client, RUNS, pipeline_name=name)} == {name}


@pytest.mark.parametrize(
    ("template", "url", "params"),
    [
        ("/pipelines/v0/pipelines/{pipeline_id}/", f"/pipelines/v0/pipelines/{UNKNOWN}/", {}),
        (
            "/pipelines/v0/pipelines/{pipeline_id}/runs/",
            f"/pipelines/v0/pipelines/{UNKNOWN}/runs/",
            {},
        ),
        ("/pipelines/v0/runs/{pipeline_run_id}/stageruns/", f"{RUNS}{UNKNOWN}/stageruns/", {}),
        (
            "/pipelines/v0/stageruns/{stage_run_id}/targetruns/",
            f"/pipelines/v0/stageruns/{UNKNOWN}/targetruns/",
            {},
        ),
        (PIPELINE_RUNS.path, RUNS, {"status": "WAITING"}),
        (PIPELINE_RUNS.path, RUNS, {"ordering": "created_at"}),
        (PIPELINE_RUNS.path, RUNS, {"limit": "many"}),
        (PIPELINES.path, PIPELINES.path, {"ordering": "-created_at"}),
        (
            "/pipelines/v0/stages/{stage_id}/targetlists/",
            "/pipelines/v0/stages/not-a-uuid/targetlists/",
            {},
        ),
    ],
    ids=lambda v: str(v)[:40],
)
def test_an_unknown_id_is_404_and_a_value_off_the_spec_is_400(
    client, template, url, params
) -> None:
    """Unknown ids answer 404, values outside the spec's enums or formats 400, each with the
    spec's error body (`{code, message, content}`)."""
    resp = client.get(url, params=params)
    assert resp.status_code == (404 if not params and "not-a-uuid" not in url else 400)
    validate_pipelines(template, resp.status_code, resp.json())


def test_a_target_run_of_another_stage_run_is_not_found(client) -> None:
    """A target run is found only under its own stage run."""
    run = next(r for r in _all(client, RUNS) if len(_stage_runs(client, r)) > 1)
    first, second = _stage_runs(client, run)[:2]
    target = _target_runs(client, first)[0]
    assert client.get(
        f"/pipelines/v0/stageruns/{first['id']}/targetruns/{target['id']}/"
    ).is_success
    other = client.get(f"/pipelines/v0/stageruns/{second['id']}/targetruns/{target['id']}/")
    assert other.status_code == 404


def test_a_key_without_read_pipeline_is_refused_and_the_rest_still_answers(sim, api) -> None:
    """A key without the `read:pipeline` scope (docs/spec/openapi-notes-credentials-access.md):
    the `status` fault refuses `/pipelines/*` with 403 in the spec's error body; other routes
    answer as before."""
    sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/*"}])
    for url in (PIPELINES.path, RUNS, f"{RUNS}{UNKNOWN}/stageruns/"):
        resp = api.get(url)
        assert resp.status_code == 403
        assert resp.json()["code"] == 403
    assert api.get("/commands/v0/commands/").status_code == 200
    sim.clear_faults()
    assert api.get(RUNS).status_code == 200


# -- the life of the runs (facility: the dynamics docstring) ------------------------------


def test_the_tenant_starts_with_every_ending_a_run_can_have(client) -> None:
    """At the start: a finished release, a run timed out waiting for approval, a run whose
    paused stage timed out, a cancelled run and a run WAITING for approval; target runs that
    succeeded, failed, timed out and were cancelled (the spec's statuses, dynamics docstring)."""
    runs = _all(client, RUNS)
    assert {"timeout", "cancelled", "waiting"} <= {r["status"] for r in runs}
    assert {"success", "failure"} & {r["status"] for r in runs}
    stage_runs = [s for r in runs for s in _stage_runs(client, r)]
    assert "timeout" in {s["status"] for s in stage_runs}
    targets = Counter(t["status"] for s in stage_runs for t in _target_runs(client, s))
    assert {"success", "failure", "timeout", "cancelled"} <= set(targets)
    waiting = next(r for r in runs if r["status"] == "waiting")
    assert "approval" in waiting["status_meta"]["reason"]


def test_runs_time_out_after_21_days_and_stages_and_target_runs_after_7(client, sim) -> None:
    """The spec's timeouts: a run still unfinished 21 days after it started, a stage run or a
    target run 7 days after, end TIMEOUT then; nothing unfinished is older."""
    now = sim.now.timestamp()
    for run in _all(client, RUNS):
        if run["status"] == "timeout":
            assert _at(run["ended_at"]) - _at(run["started_at"]) == 21 * DAY
        elif run["ended_at"] is None:
            assert now - _at(run["started_at"]) < 21 * DAY
        for stage_run in _stage_runs(client, run):
            if stage_run["status"] == "timeout":
                assert _at(stage_run["ended_at"]) - _at(stage_run["started_at"]) == 7 * DAY
            for t in _target_runs(client, stage_run):
                if t["status"] == "timeout":
                    assert _at(t["ended_at"]) - _at(t["created_at"]) == 7 * DAY
                    assert t["command_id"] is None  # never dispatched
                elif t["status"] not in TERMINAL:
                    assert now - _at(t["created_at"]) < 7 * DAY


def test_a_waiting_run_stays_waiting_until_approved_then_runs_its_next_stage(api, sim) -> None:
    """A gated run WAITs, with no next stage run, day after day, until the admin approves
    (5.5 days after asking: dynamics script); then the next stage runs and the run ends."""
    waiting = next(r for r in _all(api, RUNS) if r["status"] == "waiting")
    url = f"/pipelines/v0/pipelines/{waiting['pipeline_id']}/runs/{waiting['id']}/"
    days = 0
    while api.get(url).json()["content"]["status"] == "waiting":
        assert len(_stage_runs(api, waiting)) == 1
        sim.advance(24)
        days += 1
        assert days < 10, "never approved"
    first, second = _stage_runs(api, waiting)
    assert _at(second["started_at"]) - _at(first["ended_at"]) >= 5 * DAY
    assert days >= 1
    sim.advance(24 * 5)
    run = api.get(url).json()["content"]
    assert run["status"] in {"success", "failure"} and run["ended_at"] is not None


def test_a_run_started_on_a_later_day_progresses_as_the_clock_advances(api, sim) -> None:
    """The OS update policy runs again the day after the start: its stage runs and target runs move
    through the spec's statuses as simulated hours pass, and the stage's verdict is the spec's
    (success when every target run succeeded)."""
    before = {r["id"] for r in _all(api, RUNS)}
    sim.advance(24 + 10)
    new = [r for r in _all(api, RUNS) if r["id"] not in before]
    new = [r for r in new if r["pipeline_name"] == "OS update policy"]  # not the showcase's
    assert len(new) == 1 and new[0]["status"] == "running"
    stage_run = _stage_runs(api, new[0])[0]
    early = Counter(t["status"] for t in _target_runs(api, stage_run))
    assert set(early) <= {"queued", "dispatched", "running", "success", "failure"}
    sim.advance(24 * 6)
    run = next(r for r in _all(api, RUNS) if r["id"] == new[0]["id"])
    assert run["status"] in {"success", "failure"}
    for stage_run in _stage_runs(api, run):
        statuses = {t["status"] for t in _target_runs(api, stage_run)}
        assert statuses <= TERMINAL
        assert stage_run["status"] == ("success" if statuses == {"success"} else "failure")
    assert run["status"] == (
        "success" if all(s["status"] == "success" for s in _stage_runs(api, run)) else "failure"
    )


def test_target_runs_are_the_fleets_devices_and_its_commands(api, sim) -> None:
    """Every dispatched target run's device is a device of the tenant and its command is one of
    the tenant's command requests, whose status on that device (`/commands/v0/status/`) is the
    target run's `command_status`, its reason the target run's; a target run fails exactly
    when its command did not succeed (the spec's target run statuses)."""
    devices = {d["id"] for d in sim.truth("devices")}
    requests = {r["id"] for r in sim.truth("command_requests")}
    statuses = {(s["request"], s["device"]): s for s in sim.truth("command_statuses")}
    checked = 0
    for t in sim.truth("pipeline_target_runs"):
        if t["command_id"] is None:
            assert t["status"] in {"queued", "cancelled", "timeout", "invalid"}
            continue
        assert t["device_id"] in devices
        assert t["command_id"] in requests
        status = statuses[(t["command_id"], t["device_id"])]
        assert t["command_status"] == status["state"]
        assert t["command_meta"]["request_status_reason"] == status["reason"]
        if t["status"] == "failure":
            assert status["state"] in {"Command Failure", "Command TimeOut", "Command Cancelled"}
        assert (t["status"] == "success") == (status["state"] == "Command Success")
        checked += 1
    assert checked > 100
    failed = next(t for t in sim.truth("pipeline_target_runs") if t["status"] == "failure")
    answer = api.get("/commands/v0/status/", params={"request": failed["command_id"]}).json()
    assert answer["content"]["results"][0]["state"] == failed["command_status"]


def test_the_same_seed_gives_the_same_pipelines() -> None:
    """Seeded: two tenants of the same seed hold the same pipeline runs, stage by stage."""
    tables = ("pipelines", "pipeline_runs", "pipeline_stage_runs", "pipeline_target_runs")
    truths = []
    for _ in range(2):
        with Simulator(devices=100, seed=SEED) as s:
            s.advance(48)
            truths.append([s.truth(t) for t in tables])
    assert truths[0] == truths[1]
