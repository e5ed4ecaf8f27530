"""Shared fixtures: a simulator on loopback, a temporary warehouse file, loopback servers for the
client's tests, and one shared first load that the source and pipeline tests start from.

Every test talks only to 127.0.0.1.
"""

from __future__ import annotations

import copy
import fcntl
import os
import pickle
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import pytest
from esper_warehouse.pipelines.run.runner import RunResult
from esper_warehouse.pipelines.warehouse import working_dir

if TYPE_CHECKING:
    from tests.source.test_client import LoopbackServer, Reply, Seen

API_KEY = "sim-test-key-0123456789abcdef"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
SMALL_FLEET = 120
SEED = 7

T = TypeVar("T")


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]
) -> tuple[Path, T]:
    """`build(folder)` run once per test run, however many xdist workers ask: its folder and what
    it returned (pickled). Read-only artefacts only: a test that writes works on a copy.

    Under xdist every worker's temporary folder sits in the run's own (`pytest-<n>/popen-gw0`),
    so the artefact goes beside them, built by the first worker to take its lock while the others
    wait on it. A build that failed leaves no result behind: the next worker builds again (and
    fails the same way). Without xdist it is built into an ordinary temporary folder.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        return folder, build(folder)
    root = tmp_path_factory.getbasetemp().parent / "built_once"
    root.mkdir(exist_ok=True)
    folder, result = root / name, root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            built = pickle.dumps(build(folder))
            result.with_suffix(".partial").write_bytes(built)
            result.with_suffix(".partial").rename(result)
    return folder, pickle.loads(result.read_bytes())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Only the first notebooks file starts with the run; the others wait until tests/pipeline/'s
    files have been handed out.

    xdist hands out files in collection order (pyproject.toml `--no-loadscope-reorder`). Every
    notebooks file reads the demo warehouse and its report (tests/notebooks/conftest.py), built
    once (`built_once`, ~55 s, much of it one process) by the first file that asks; in collection
    order the first three workers all took notebooks files, and two of them waited for that build
    doing nothing. Held back, the others run when it is long built, and the two workers load and
    test meanwhile. The order of the files within each group is kept.
    """
    notebooks = Path(__file__).parent / "notebooks"
    readers = [item for item in items if item.path.parent == notebooks]
    pipeline = [i for i, item in enumerate(items) if item.path.parent.name == "pipeline"]
    if not readers or not pipeline:
        return  # a selection without both groups: as collected
    held = [item for item in readers if item.path != readers[0].path]
    moved = set(held)
    before = [item for item in items[: pipeline[-1] + 1] if item not in moved]
    items[:] = before + held + [item for item in items[pipeline[-1] + 1 :] if item not in moved]


@pytest.fixture(scope="session")
def stopping() -> Iterator[list[threading.Thread]]:
    """Threads stopping the `sim` simulators of finished tests; all are waited for at the end."""
    threads: list[threading.Thread] = []
    yield threads
    for thread in threads:
        thread.join(timeout=15)


@pytest.fixture
def sim(stopping: list[threading.Thread]) -> Iterator[object]:
    """A fresh simulator with a small fleet, served on a free loopback port.

    It is stopped in the background once the test is over: uvicorn takes 0.1-0.2 s to notice and
    wind down (longer while a killed client's connection lingers), and nothing uses its port any
    more (every simulator serves on a free port of its own).
    """
    from esper_warehouse.simulator import Simulator

    server = Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ).start()
    try:
        yield server
    finally:
        stopping.append(threading.Thread(target=server.stop, name="stop-sim", daemon=True))
        stopping[-1].start()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """Path of a DuckDB file that does not exist yet, in a per-test folder."""
    return tmp_path / "warehouse.duckdb"


@pytest.fixture
def wh(warehouse: Path) -> Path:
    """`warehouse`, by the short name the pipeline tests use."""
    return warehouse


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts to hold the warehouse file; killed after the test."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Seen], Reply]], LoopbackServer]]:
    """Start loopback servers on demand (`tests/source/test_client.py`'s kit); all are stopped after the test."""
    from tests.source.test_client import LoopbackServer

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


def _first_load(folder: Path) -> tuple[RunResult, dict[str, Any]]:
    from esper_warehouse.simulator import Simulator

    from tests.pipeline.helpers import load

    with Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as sim:
        result = load(sim, folder / "warehouse.duckdb")
        stats = sim.stats()
    assert result.exit_code == 0, result.error
    assert result.requests == stats["total"]  # the result's count is the API's
    return result, stats


@pytest.fixture(scope="session")
def shared_first_load(tmp_path_factory: pytest.TempPathFactory) -> FirstLoad:
    """One full load, once per test run (`built_once`), of a simulator built exactly as the `sim`
    fixture builds it.

    A simulator's world depends only on its seed and `advance` calls (serving requests changes
    nothing), so this warehouse is what `load(sim, wh)` gives on any fresh `sim`; only the URL
    fields (`enterprise`, `device`, `parent`) name this simulator's port, and no test compares them.
    """
    folder, (result, stats) = built_once(tmp_path_factory, "first_load", _first_load)
    return FirstLoad(folder / "warehouse.duckdb", result, stats)


@pytest.fixture(scope="session")
def shared_modelled_load(
    tmp_path_factory: pytest.TempPathFactory, shared_first_load: FirstLoad
) -> FirstLoad:
    """The shared first load with the models built on it, once per test run: what
    `first_load(wh)` then `build_models(wh)` give, built once for every test that starts so."""
    from esper_warehouse.pipelines.build.models import build_models

    def build(folder: Path) -> None:
        copy_warehouse(shared_first_load.warehouse, folder / "warehouse.duckdb")
        build_models(folder / "warehouse.duckdb")

    folder, _ = built_once(tmp_path_factory, "first_load_modelled", build)
    return FirstLoad(folder / "warehouse.duckdb", shared_first_load.result, shared_first_load.stats)


@pytest.fixture
def first_load(sim, shared_first_load: FirstLoad) -> Callable[[Path], RunResult]:
    """`first_load(wh)` stands for a test's opening `load(sim, wh)` on its fresh `sim`: it copies
    the shared full load (the DuckDB file and dlt's working folder beside it) to `wh` and returns
    that load's result. The tests that follow a first load with other runs use it; the tests of the
    first load itself assert on the same load and the same files."""
    return _copies(sim, shared_first_load)


@pytest.fixture
def modelled_first_load(sim, shared_modelled_load: FirstLoad) -> Callable[[Path], RunResult]:
    """`first_load(wh)` followed by `build_models(wh)`, as one copy of a warehouse built once."""
    return _copies(sim, shared_modelled_load)


def _copies(sim, template: FirstLoad) -> Callable[[Path], RunResult]:
    """What copies `template` to a test's `wh`, for a test whose `sim` has not moved yet."""
    # The test's simulator must be the one that was loaded: fresh, untouched, no faults.
    assert sim.now == template.result.as_of, "the simulator moved before its first load"
    assert sim.stats()["total"] == 0 and sim.faults.describe() == []

    def copy_to(wh: Path) -> RunResult:
        copy_warehouse(template.warehouse, wh)
        return copy.deepcopy(template.result)

    return copy_to


def copy_warehouse(source: Path, wh: Path) -> None:
    """A loaded warehouse copied to `wh`, a path with nothing there yet: the DuckDB file (and the
    write-ahead log a killed run may leave beside it) and dlt's working folder beside it (its
    pipeline state), as if `wh` had been loaded itself."""
    assert wh.name == source.name  # DuckDB names the catalog after the file
    assert not wh.exists() and not working_dir(wh).exists()
    wh.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, wh)
    wal = source.with_name(source.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, wh.with_name(wh.name + ".wal"))
    shutil.copytree(working_dir(source), working_dir(wh))


def storage_version(path: Path) -> str:
    """The DuckDB storage format a file is written in (`v1.5.0+`: `warehouse.STORAGE_VERSION`)."""
    with duckdb.connect(str(path), read_only=True) as con:
        tags = con.execute(
            "select tags from duckdb_databases() where path = ?", [str(path)]
        ).fetchone()
    assert tags is not None
    return tags[0]["storage_version"]
