"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from esper_warehouse.pipelines.runner import RunResult
from esper_warehouse.pipelines.warehouse import working_dir

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET
from tests.pipeline.helpers import load
from tests.pipeline.test_client import LoopbackServer, Reply, Seen


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Seen], Reply]], LoopbackServer]]:
    """Start loopback servers on demand (`test_client.py`'s kit); all are stopped after the test."""
    servers: list[LoopbackServer] = []

    def start(respond: Callable[[Seen], Reply]) -> LoopbackServer:
        servers.append(LoopbackServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@dataclass(frozen=True)
class FirstLoad:
    """The files and the result of one full load of a fresh `sim` (SMALL_FLEET devices, SEED)."""

    warehouse: Path
    result: RunResult
    stats: dict[str, Any]  # the simulator's request counts after the load (`Simulator.stats`)


@pytest.fixture(scope="session")
def shared_first_load(tmp_path_factory: pytest.TempPathFactory) -> FirstLoad:
    """One full load, once per worker, of a simulator built exactly as the `sim` fixture builds it.

    A simulator's world depends only on its seed and `advance` calls (serving requests changes
    nothing), so this warehouse is what `load(sim, wh)` gives on any fresh `sim`; only the URL
    fields (`enterprise`, `device`, `parent`) name this simulator's port, and no test compares them.
    """
    from esper_warehouse.simulator import Simulator

    warehouse = tmp_path_factory.mktemp("first_load") / "warehouse.duckdb"
    with Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as sim:
        result = load(sim, warehouse)
        stats = sim.stats()
    assert result.exit_code == 0, result.error
    assert result.requests == stats["total"]  # the result's count is the API's
    return FirstLoad(warehouse, result, stats)


@pytest.fixture
def first_load(sim, shared_first_load: FirstLoad) -> Callable[[Path], RunResult]:
    """`first_load(wh)` stands for a test's opening `load(sim, wh)` on its fresh `sim`: it copies
    the shared full load (the DuckDB file and dlt's working folder beside it) to `wh` and returns
    that load's result. The tests that follow a first load with other runs use it; the tests of the
    first load itself assert on the same load and the same files."""
    template = shared_first_load
    # The test's simulator must be the one that was loaded: fresh, untouched, no faults.
    assert sim.now == template.result.as_of, "the simulator moved before its first load"
    assert sim.stats()["total"] == 0 and sim.faults.describe() == []

    def copy_to(wh: Path) -> RunResult:
        assert wh.name == template.warehouse.name  # DuckDB names the catalog after the file
        assert not wh.exists() and not working_dir(wh).exists()
        wh.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template.warehouse, wh)
        shutil.copytree(working_dir(template.warehouse), working_dir(wh))
        return copy.deepcopy(template.result)

    return copy_to
