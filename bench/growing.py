"""Growing figures for README "Growing" (run by hand: `.venv/bin/python -m bench.growing`).

1. `esper-warehouse run --all-tenants` on three simulated tenants of 2,000 devices (subprocess);
2. one Dagster partition (2,000 devices) materialised in-process (load + models);
3. `esper-warehouse publish` of the marts of a 20,000-device warehouse into Postgres (pgserver).

Prints one line per figure with the machine's load average; no assertion (the tests prove it
works, this measures it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from esper_warehouse.simulator import Simulator  # noqa: E402

from tests.conftest import API_KEY, ENTERPRISE_ID  # noqa: E402
from tests.scale.conftest import write_tenants  # noqa: E402
from tests.scale.postgres import postgres_server  # noqa: E402


def _load() -> str:
    return "load avg " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def all_tenants(tmp: Path, devices: int = 2000) -> None:
    sims = {n: Simulator(devices=devices, seed=i, api_key=API_KEY, enterprise_id=ENTERPRISE_ID).start()
            for i, n in enumerate(("north", "south", "east"), 1)}  # fmt: skip
    try:
        path = write_tenants(tmp / "tenants.toml", sims, tmp / "w")
        env = {**os.environ, **{f"ESPER_TEST_KEY_{n.upper()}": API_KEY for n in sims}}
        started = time.perf_counter()
        done = subprocess.run(
            [str(Path(sys.executable).parent / "esper-warehouse"), "run", "--all-tenants",
             "--tenants-file", str(path)], env=env, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        print(done.stdout)
        print(
            f"all-tenants 3 x {devices:,} devices: {seconds:.1f} s, exit {done.returncode} ({_load()})"
        )
    finally:
        for sim in sims.values():
            sim.stop()


def dagster_partition(tmp: Path, devices: int = 2000) -> None:
    import dagster as dg
    from esper_warehouse.pipelines.jobs.dagster_defs import build_definitions

    with Simulator(devices=devices, seed=4, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        os.environ["ESPER_TEST_KEY_WEST"] = API_KEY
        defs = build_definitions(write_tenants(tmp / "dg.toml", {"west": sim}, tmp / "dg"))
        assets = [defs.resolve_assets_def(dg.AssetKey(["esper", "devices"])),
                  defs.resolve_assets_def(dg.AssetKey(["marts", "fleet_compliance"]))]  # fmt: skip
        started = time.perf_counter()
        with dg.DagsterInstance.ephemeral() as instance:
            result = dg.materialize(assets, partition_key="west", instance=instance)
        seconds = time.perf_counter() - started
    print(f"dagster partition {devices:,} devices (load + models): {seconds:.1f} s, "
          f"success {result.success} ({_load()})")  # fmt: skip


def publish_postgres(tmp: Path, devices: int = 20000) -> None:
    from esper_warehouse.pipelines.run.runner import RunSettings, run
    from esper_warehouse.pipelines.views import publish

    warehouse = tmp / "big.duckdb"
    with Simulator(devices=devices, seed=5, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        started = time.perf_counter()
        result = run(RunSettings(warehouse=warehouse, source_options={
            "base_url": sim.base_url, "api_key": API_KEY, "enterprise_id": ENTERPRISE_ID}))  # fmt: skip
        print(f"load + models {devices:,} devices: {time.perf_counter() - started:.1f} s, "
              f"exit {result.exit_code}")  # fmt: skip
    with postgres_server() as uri:
        con = publish.connect(uri)
        try:
            for attempt in (1, 2):
                started = time.perf_counter()
                counts = publish.publish(warehouse, con)
                print(f"publish #{attempt} of {devices:,} devices' marts to Postgres: "
                      f"{time.perf_counter() - started:.2f} s, {sum(counts.values()):,} rows "
                      f"({_load()})")  # fmt: skip
        finally:
            con.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="growing-") as tmp:
        all_tenants(Path(tmp))
        dagster_partition(Path(tmp))
        publish_postgres(Path(tmp))
