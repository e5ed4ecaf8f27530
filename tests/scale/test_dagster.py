"""Dagster (the `dagster` extra): definitions offline, two tenants materialised, the webserver."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import duckdb
import pytest
from esper_warehouse.pipelines.run.runner import RunSettings
from esper_warehouse.pipelines.views import digest
from esper_warehouse.pipelines.views.notify import NOTIFY_ENV
from esper_warehouse.sources.esper.tables import TABLES

from tests.conftest import API_KEY
from tests.pipeline.test_notify import Listener
from tests.scale.conftest import write_tenants

ROOT = Path(__file__).resolve().parents[2]
MARTS = {path.stem for path in (ROOT / "sql" / "marts").glob("*.sql")}  # one asset per mart


@pytest.fixture(scope="module")
def dg() -> ModuleType:
    """dagster, imported when a test here runs, not when the suite is collected (~1.5 CPU-s in
    every worker); these tests are skipped without it. `make install` installs every extra."""
    return pytest.importorskip("dagster")


def _offline_tenants(tmp_path: Path) -> Path:
    class Unreachable:
        base_url = "http://127.0.0.1:9/api"

    return write_tenants(tmp_path / "tenants.toml", {"north": Unreachable(), "south": Unreachable()},
                         tmp_path / "w")  # fmt: skip


def test_definitions_load_without_network(
    dg: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from esper_warehouse.pipelines.jobs.dagster_defs import API_POOL, build_definitions

    path = _offline_tenants(tmp_path)

    # connections from this thread are refused (other tests' servers may still be winding down)
    this_thread = threading.current_thread()
    attempts: list[object] = []
    connect, create_connection = socket.socket.connect, socket.create_connection

    def refuse_connect(sock: socket.socket, address: object) -> object:
        if threading.current_thread() is this_thread:
            attempts.append(address)
            raise OSError("network refused by the test")
        return connect(sock, address)

    def refuse_create(address: object, *args: object, **kwargs: object) -> object:
        if threading.current_thread() is this_thread:
            attempts.append(address)
            raise OSError("network refused by the test")
        return create_connection(address, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", refuse_connect)
    monkeypatch.setattr(socket, "create_connection", refuse_create)
    defs = build_definitions(path, notify_urls=["json://127.0.0.1:9/"])  # sent only by a run
    graph = defs.resolve_asset_graph()
    keys = {"/".join(k.path) for k in graph.get_all_asset_keys()}
    assert {f"marts/{m}" for m in MARTS} <= keys
    assert {"esper/devices", "esper/device_events", "esper/command_statuses"} <= keys
    assert not any(k.startswith("esper/_") for k in keys)  # the run ledger is not an asset
    assert len(keys) == len(TABLES) + len(MARTS) + 1  # a raw asset per table, and the fleet
    fleet = graph.get(dg.AssetKey(["fleet", "marts"]))
    assert {f"marts/{m}" for m in MARTS} == {"/".join(p.path) for p in fleet.parent_keys}
    assert fleet.automation_condition is not None, "rebuilt after the tenants' marts"

    # lineage from the model SQL, through staging and intermediate
    parents = {k: {"/".join(p.path) for p in graph.get(dg.AssetKey(k.split("/"))).parent_keys}
               for k in ("marts/stale_devices", "marts/command_rollout", "marts/fleet_compliance")}  # fmt: skip
    assert "marts/fleet_compliance" in parents["marts/stale_devices"]
    assert {"esper/command_requests", "esper/command_statuses"} <= parents["marts/command_rollout"]
    assert "esper/devices" in parents["marts/fleet_compliance"]
    # the last user of a device comes from the commands; operations reach no compliance column
    assert "esper/command_requests" in parents["marts/fleet_compliance"]
    assert "esper/operations" not in parents["marts/fleet_compliance"]

    node = graph.get(dg.AssetKey(["esper", "devices"]))
    assert node.partitions_def.get_partition_keys() == ["north", "south"]
    load_op = defs.resolve_assets_def(dg.AssetKey(["esper", "devices"])).op
    assert load_op.pool == API_POOL

    # the nightly schedule asks for one run per tenant
    schedule = defs.resolve_schedule_def("esper_nightly_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 23, 2, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    )
    requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert sorted(r.partition_key for r in requests) == ["north", "south"]
    assert len({r.run_key for r in requests}) == 2
    assert attempts == []


def test_the_guide_s_selection_takes_the_whole_load_and_one_table_is_refused(
    dg: ModuleType, tmp_path: Path
) -> None:
    """docs/guide/growing.md's `dagster asset materialize --select` (parsed as Dagster's command
    line parses it) builds a run of every raw table and mart; one raw table alone is refused, as
    the guide says, since the load is one step."""
    from esper_warehouse.pipelines.jobs.dagster_defs import build_definitions

    readme = (ROOT / "docs" / "guide" / "growing.md").read_text()
    (selection,) = re.findall(r"dagster asset materialize .*--select (\S+)", readme)
    defs = build_definitions(_offline_tenants(tmp_path))
    graph, job = defs.resolve_asset_graph(), defs.resolve_implicit_global_asset_job_def()

    def subset(text: str) -> set[str]:
        keys = dg.AssetSelection.from_coercible(text.split(",")).resolve(graph)
        job.get_subset(asset_selection=keys)
        return {"/".join(k.path) for k in keys}

    assert subset(selection) == {f"esper/{t}" for t in TABLES} | {f"marts/{m}" for m in MARTS}
    with pytest.raises(dg.DagsterInvalidSubsetError):
        subset("esper/devices")
    assert "`--select esper/devices`, fails with `DagsterInvalidSubsetError`" in " ".join(
        readme.split()
    )


def test_the_instance_settings_limit_one_run_per_tenant_and_the_api_pool(
    dg: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dagster.yaml").write_text((ROOT / "orchestration" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        config = instance.get_concurrency_config()
    assert config.run_queue_config.tag_concurrency_limits == [
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]
    assert config.pool_config.default_pool_limit == 2


def test_the_shipped_instance_settings_turn_telemetry_off(
    dg: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dagster.yaml").write_text((ROOT / "orchestration" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert instance.telemetry_enabled is False


def test_two_tenants_materialize_the_fleet_follows_them_and_a_refused_one_fails(
    dg: ModuleType, tenant_sims: dict[str, object], tmp_path: Path
) -> None:
    """Two tenants' partitions in process, then the fleet asset; a tenant's next night and the
    fleet again (under Dagster the cross-tenant file must not go stale); a refused key fails its
    partition. One test: each partition is a run and a models build.

    The runs load the device list only (`base` is the settings every partition's run starts
    from): what is checked here is Dagster's wiring; a whole tenant's run is the runner's tests'.
    """
    from esper_warehouse.pipelines.jobs.dagster_defs import build_definitions

    warehouses = tmp_path / "w"
    defs = build_definitions(
        write_tenants(tmp_path / "tenants.toml", tenant_sims, warehouses),
        base=RunSettings(lock_timeout_s=5.0, resources=["devices"]),
    )
    assets = [defs.resolve_assets_def(dg.AssetKey(["esper", "devices"])),
              defs.resolve_assets_def(dg.AssetKey(["marts", "fleet_compliance"]))]  # fmt: skip
    fleet_asset = defs.resolve_assets_def(dg.AssetKey(["fleet", "marts"]))

    def fleet_rows() -> dict[str, int]:
        with duckdb.connect(str(warehouses / "fleet.duckdb"), read_only=True) as con:
            return dict(
                con.sql("select tenant, count(*) from marts.fleet_compliance group by 1").fetchall()
            )

    def tenant_rows(tenant: str) -> int:
        with duckdb.connect(str(warehouses / f"{tenant}.duckdb"), read_only=True) as con:
            return con.sql("select count(*) from marts.fleet_compliance").fetchone()[0]

    with dg.DagsterInstance.ephemeral() as instance:
        for tenant in ("alpha", "beta"):
            result = dg.materialize(assets, partition_key=tenant, instance=instance)
            assert result.success
            rows = {
                "/".join(m.asset_key.path): m.metadata
                for m in result.asset_materializations_for_node("esper_models")
            }
            assert set(rows) == {f"marts/{m}" for m in MARTS}
            devices = len(tenant_sims[tenant].truth("devices"))  # type: ignore[attr-defined]
            with duckdb.connect(str(warehouses / f"{tenant}.duckdb"), read_only=True) as con:
                assert con.sql("select count(*) from esper.devices").fetchone()[0] == devices
                current = con.sql("select count(*) from marts.fleet_compliance").fetchone()[0]
            assert rows["marts/fleet_compliance"]["rows"].value == current > 0
            loaded = {
                "/".join(m.asset_key.path): m.metadata["rows_loaded"].value
                for m in result.asset_materializations_for_node("esper_load")
            }
            assert loaded["esper/devices"] == devices

        assert dg.materialize([fleet_asset], instance=instance).success
        assert fleet_rows() == {"alpha": tenant_rows("alpha"), "beta": tenant_rows("beta")}
        with duckdb.connect(str(warehouses / "alpha.duckdb")) as con:  # a stale mart, to see it go
            con.execute("delete from marts.fleet_compliance where device_id in "
                        "(select device_id from marts.fleet_compliance limit 3)")  # fmt: skip
        assert fleet_rows()["alpha"] == tenant_rows("alpha") + 3
        tenant_sims["alpha"].advance(hours=24)  # type: ignore[attr-defined]
        assert dg.materialize(assets, partition_key="alpha", instance=instance).success
        assert dg.materialize([fleet_asset], instance=instance).success
        assert fleet_rows() == {"alpha": tenant_rows("alpha"), "beta": tenant_rows("beta")}

        failed = dg.materialize(
            assets, partition_key="gamma", instance=instance, raise_on_error=False
        )
    assert not failed.success
    failure = next(e for e in failed.all_events if e.is_step_failure)
    assert "EsperAuthError" in str(failure.event_specific_data.error)


def test_each_tenants_night_sends_the_run_notify_message(
    dg: ModuleType, tenant_sims: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `notify_urls` setting (a loopback listener): a tenant's night under Dagster sends the
    message `run --notify` sends once its marts are built (the outcome, what changed), and a
    night whose load failed sends its failure, why, never the key."""
    from esper_warehouse.pipelines.jobs.dagster_defs import build_definitions

    listener = Listener()
    monkeypatch.setenv(NOTIFY_ENV, f"json://127.0.0.1:{listener.port}/")
    warehouses = tmp_path / "w"
    defs = build_definitions(
        write_tenants(tmp_path / "tenants.toml", tenant_sims, warehouses),
        base=RunSettings(lock_timeout_s=5.0, resources=["devices"]),
    )
    assets = [defs.resolve_assets_def(dg.AssetKey(["esper", "devices"])),
              defs.resolve_assets_def(dg.AssetKey(["marts", "fleet_compliance"]))]  # fmt: skip
    try:
        with dg.DagsterInstance.ephemeral() as instance:
            assert dg.materialize(assets, partition_key="alpha", instance=instance).success
            tenant_sims["alpha"].advance(hours=24)  # type: ignore[attr-defined]
            assert dg.materialize(assets, partition_key="alpha", instance=instance).success
            failed = dg.materialize(
                assets, partition_key="gamma", instance=instance, raise_on_error=False
            )
    finally:
        listener.close()
    assert not failed.success
    assert [p["title"] for p in listener.posts[:2]] == ["esper-warehouse: ok"] * 2
    with duckdb.connect(str(warehouses / "alpha.duckdb"), read_only=True) as con:
        (as_of,) = con.sql("select max(as_of) from esper._esper_runs").fetchone()  # type: ignore[misc]
        (since,) = con.sql("select max(since) from changes.comparisons").fetchone()  # type: ignore[misc]
        told = digest.lines(digest.read(con), digest.not_compared_label(con))
    second = listener.posts[1]["message"].splitlines()
    assert second[0] == f"loaded as of {as_of:%Y-%m-%d %H:%M} UTC"
    assert second[1].startswith(f"Since {since:%Y-%m-%d %H:%M} UTC")
    assert second[1 : 1 + len(told)] == told  # the digest, as `status` and `run --notify` say it
    assert len(listener.posts) == 3, "one message per night"
    assert listener.posts[2]["title"] == "esper-warehouse: failed"
    assert "401" in listener.posts[2]["message"]
    assert API_KEY not in json.dumps(listener.posts)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_webserver_starts_on_loopback_and_lists_the_assets(
    dg: ModuleType, tmp_path: Path
) -> None:
    port = _free_port()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
           "ESPER_WAREHOUSE__TENANTS_FILE": str(_offline_tenants(tmp_path))}  # fmt: skip
    webserver = Path(sys.executable).parent / "dagster-webserver"
    proc = subprocess.Popen(
        [str(webserver), "-m", "esper_warehouse.pipelines.jobs.dagster_defs", "-a", "defs",
         "-h", "127.0.0.1", "-p", str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    query = json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode()
    deadline = time.monotonic() + 60
    nodes = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/graphql", data=query,
                    headers={"Content-Type": "application/json"},
                )  # fmt: skip
                with urllib.request.urlopen(request, timeout=5) as answer:
                    nodes = json.load(answer)["data"]["assetNodes"]
                if nodes:
                    break
            except OSError:
                pass
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            output = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output = proc.communicate()[0]
    assert nodes, f"no asset listed within 60 s; webserver said:\n{output[-3000:]}"
    keys = {"/".join(n["assetKey"]["path"]) for n in nodes}
    assert {f"marts/{m}" for m in MARTS} | {"esper/devices"} <= keys
    assert proc.returncode is not None
