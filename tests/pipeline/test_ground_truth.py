"""Full and nightly loads against the simulator: every table equals the API's truth."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import duckdb
import httpx
import orjson
import pytest
from esper_warehouse.pipelines.run.runner import run
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.pipelines.warehouse import working_dir
from esper_warehouse.sources.esper.http import EsperClient
from esper_warehouse.sources.esper.times import iso

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import COMPARED, TABLES, compare, load, reading, rows, settings, with_body

HOUR = timedelta(hours=1)
# What the app-retirement tests load after the shared first load: the device list (with its census)
# and the per-device app lists, not the whole tenant ("Scenario tests load the tables they
# check", docs/decisions.md). The whole-tenant runs are the first two tests here.
APPS = ["devices", "device_apps"]


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    # Not the shared `warehouse` fixture: its file is named like the dataset (`esper`), which
    # DuckDB cannot tell apart from the schema (the pipeline refuses it, see test_config_errors).
    return tmp_path / "warehouse.duckdb"


def test_full_then_nightly_equal_the_truth_the_nightly_with_far_fewer_requests(
    sim, wh: Path, first_load, capsys
) -> None:
    first = first_load(wh)
    assert first.exit_code == 0, first.error
    assert first.mode == "full" and first.as_of == sim.now
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)
    recon = {r["table_name"]: r for r in first.reconciliation}
    assert {"devices", "device_apps", "command_statuses", "heartbeats"} <= set(recon)
    assert all(r["ok"] and r["loaded"] >= r["expected"] > 0 for r in recon.values())

    removed_before = {d["id"] for d in sim.truth("devices")}
    sim.advance(hours=24)
    nightly = load(sim, wh)
    assert nightly.exit_code == 0, nightly.error
    assert nightly.mode == "incremental"
    # Far fewer requests than the first load. 120 devices: the full load makes ~373 requests, a
    # nightly ~98, of which 28 read the Pipelines stages' plans, as every run does (it was 1,650
    # and ~100 on 800 devices); re-reading every device's apps or events (120 more) would alone
    # pass the bound below. The simulator counts from zero: the first load is a copy.
    requests = sim.stats()["total"]
    assert requests == nightly.requests  # the client counts what the API saw
    assert requests * 3 < first.requests, f"nightly {requests} requests vs full {first.requests}"
    with reading(wh):
        for table in TABLES:
            # Records the API dropped since (removed devices and their rows) stay in the warehouse.
            compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))
    extra = {r[0] for r in rows(wh, "devices", ("id",))} - {d["id"] for d in sim.truth("devices")}
    assert extra <= removed_before  # only devices that were removed meanwhile
    # dlt's working folder keeps the packages' state, not the loaded data files (every night's)
    assert list(working_dir(wh.resolve()).rglob("completed_jobs/*")) == []

    # History: one row per device version, no duplicates; the census is the first full scan.
    history = rows(wh, "device_history", ("id", "updated_at"))
    assert len(history) == len(set(history))
    assert set(rows(wh, "devices", ("id", "updated_at"))) <= set(history)
    census = rows(wh, "device_census", ("id",))
    assert {c[0] for c in census} == removed_before

    # Bookkeeping: one row per run, with the API's time.
    runs = rows(wh, "_esper_runs", ("mode", "status", "as_of"), "order by started_at")
    assert runs == [("full", "ok", first.as_of), ("incremental", "ok", nightly.as_of)]

    assert status(wh) == 0
    shown = capsys.readouterr().out
    assert "incremental ok" in shown and "full        ok" in shown
    assert "device_census" in shown and "SHORT" not in shown


def test_complete_scan_retires_the_apps_of_removed_devices(sim, wh: Path, first_load) -> None:
    assert first_load(wh).exit_code == 0
    device = rows(wh, "device_apps", ("device_id",), "order by device_id limit 1")[0][0]
    world = sim.world
    with world.lock:  # the device leaves the fleet (as an admin's wipe and removal would)
        world.fleet.removed[world.fleet.ids.index(device)] = True
        world.fleet.version += 1
    sim.advance(hours=24)
    nightly = load(sim, wh, resources=APPS)
    assert nightly.exit_code == 0, nightly.error
    assert rows(
        wh, "device_apps", ("1",), f"where device_id = '{device}' and _dlt_valid_to is null"
    )
    weekly = load(sim, wh, full=True, resources=APPS)
    assert weekly.exit_code == 0, weekly.error
    compare(sim, wh, "device_apps")  # exact again: no current row for the removed device
    ends = rows(wh, "device_apps", ("_dlt_valid_to",), f"where device_id = '{device}'")
    assert ends and set(ends) == {(weekly.as_of,)}


def test_rerun_without_changes_duplicates_nothing(sim, wh: Path, first_load) -> None:
    assert first_load(wh).exit_code == 0
    counts = {t: len(rows(wh, t, ("1",))) for t in ("devices", "device_apps", "device_events")}
    again = load(sim, wh, full=True, resources=list(counts))
    assert again.exit_code == 0, again.error
    for table, n in counts.items():
        assert len(rows(wh, table, ("1",))) == n, table
    versions = rows(wh, "device_apps", ("_dlt_valid_to",), "where _dlt_valid_to is not null")
    assert versions == []  # an unchanged app list retires nothing


class HideApps(httpx.HTTPTransport):
    """Loopback transport that drops apps from one device's list (uninstalls)."""

    def __init__(self, device_id: str, hide: int) -> None:
        super().__init__()
        self.device_id, self.hide = device_id, hide

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if f"/{self.device_id}/" not in request.url.path or "app" not in request.url.path:
            return response
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body) if "results" not in body else body
        kept = envelope["results"][self.hide :]
        envelope["count"] -= len(envelope["results"]) - len(kept)
        envelope["results"] = kept
        return with_body(response, body)


@pytest.mark.parametrize("hide", [1, 1000], ids=["one-app", "every-app"])
def test_apps_gone_from_a_complete_list_are_retired_at_the_api_time(
    sim, wh: Path, first_load, hide: int
) -> None:
    assert first_load(wh).exit_code == 0
    apps = rows(wh, "device_apps", ("device_id", "id"), "order by device_id, id")
    device = apps[0][0]
    installed = sum(1 for d, _ in apps if d == device)
    sim.advance(hours=24)
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=HideApps(device, hide))
    result = run(settings(sim, wh, full=True, resources=APPS), client=client)
    client.close()
    assert result.exit_code == 0, result.error
    gone = min(hide, installed)
    # The device's hidden apps are retired at the run's API time; other devices' lists may
    # have changed that day too (app updates), so only this device's rows are counted.
    retired = rows(wh, "device_apps", ("_dlt_valid_to",),
                   f"where device_id = '{device}' and _dlt_valid_to is not null")  # fmt: skip
    truth = [a for a in sim.truth("device_apps") if a["device_id"] == device]
    current = rows(wh, "device_apps", ("id",),
                   f"where device_id = '{device}' and _dlt_valid_to is null")  # fmt: skip
    assert len(current) == len(truth) - gone
    assert len(retired) >= gone and set(retired) == {(result.as_of,)}
    everywhere = rows(wh, "device_apps", ("device_id",), "where _dlt_valid_to is null")
    assert len(everywhere) == len(sim.truth("device_apps")) - gone


def test_selected_resources_only(sim, wh: Path) -> None:
    result = load(sim, wh, resources=["groups", "blueprints"])
    assert result.exit_code == 0, result.error
    assert set(result.rows) == {"groups", "blueprints", "blueprint_versions"}
    compare(sim, wh, "blueprint_versions")
    con = duckdb.connect(str(wh), read_only=True)
    tables = {
        r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()
    }
    con.close()
    assert "devices" not in tables


@pytest.mark.parametrize(
    ("selected", "loaded"),
    [
        # read by request id, by operation id: alone they loaded nothing and said ok
        (["command_statuses", "operation_devices"],
         {"command_requests", "command_statuses", "operations", "operation_devices"}),
        # read per device of the walk: alone, exit 1 (no census) and exit 4 (devices missing)
        (["device_apps", "device_events"],
         {"devices", "device_history", "device_census", "device_apps", "device_events"}),
        # per application, and a companion: alone, exit 4 (the parent list missing)
        (["application_versions", "blueprint_versions"],
         {"applications", "application_versions", "blueprints", "blueprint_versions"}),
    ],
    ids=["by-id", "per-device", "per-parent"],
)  # fmt: skip
def test_a_selected_table_loads_the_tables_it_reads_ids_from(
    sim, wh: Path, selected: list[str], loaded: set[str]
) -> None:
    result = load(sim, wh, resources=selected)
    assert result.exit_code == 0, result.error
    assert set(result.rows) == loaded
    with reading(wh):
        for table in set(result.rows) & set(COMPARED):
            compare(sim, wh, table)


def test_nightly_rereads_the_versions_of_changed_blueprints_only(sim, wh: Path, first_load) -> None:
    assert first_load(wh).exit_code == 0
    sim.advance(hours=1)
    world = sim.world
    with world.lock:  # an admin publishes a new version of one blueprint
        world.fleet.add_blueprint_version(0, world.now, random.Random(1))
    sim.reset_stats()
    nightly = load(sim, wh, resources=["blueprints"])
    assert nightly.exit_code == 0, nightly.error
    compare(sim, wh, "blueprints")
    compare(sim, wh, "blueprint_versions")  # the new version is there
    reads = sim.stats()["routes"].get("GET /v2/blueprints/{id}/versions/", 0)
    changed = {
        b["id"] for b in sim.truth("blueprints") if b["updated_at"] > iso(nightly.as_of - HOUR)
    }
    assert reads == len(changed) < len(sim.truth("blueprints"))
    weekly = load(sim, wh, full=True, resources=["blueprints"])  # every list is read again
    assert weekly.exit_code == 0, weekly.error
    compare(sim, wh, "blueprint_versions")
