"""A big full scan is committed in parts: a first load killed part-way goes on where it stopped.

`commit_every_devices` is set low here so that the 120-device test fleet is loaded in parts
(the default, 1,000, applies to tenants above 1,000 devices). The same scenario at 5,000 devices,
killed at 30 %, 60 % and 90 % of a clean load's requests, is measured by `bench.realtenant`.
"""

from __future__ import annotations

import copy
import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

import duckdb
import pytest
from esper_warehouse.pipelines.run.runner import RunResult
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET, copy_warehouse

from .helpers import TABLES, cli, compare, load, reading, rows

PART = 40  # devices per part: 120 devices make three parts and a last one
PARTS = {"commit_every_devices": PART}
# The device list and the tables whose activity makes a device's event feed read (`Table.after`).
ACTIVITY = ["devices", "command_statuses", "operation_devices"]


def _twin() -> Simulator:
    """A second simulator serving exactly the fleet of the `sim` fixture (same seed and time)."""
    return Simulator(devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID)


@dataclass(frozen=True)
class InParts:
    """A clean first load in parts of a fresh `_twin`, and what it logged at INFO."""

    warehouse: Path
    result: RunResult
    logged: list[str]


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def in_parts(tmp_path_factory: pytest.TempPathFactory) -> InParts:
    """The clean load in parts, once for the module: what a fresh `sim` gives (`shared_first_load`
    in tests/conftest.py says why), copied where a test starts from it, counted where one
    compares a resumed load with it."""
    warehouse = tmp_path_factory.mktemp("in_parts") / "warehouse.duckdb"
    logger, handler = logging.getLogger("esper_warehouse"), _Messages()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        with _twin() as twin:
            result = load(twin, warehouse, source_options=PARTS)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return InParts(warehouse, result, handler.messages)


@dataclass(frozen=True)
class Killed:
    """A first load in parts (`esper-warehouse run` of a fresh `_twin`) SIGKILLed once two parts
    were committed, and the requests the twin saw."""

    warehouse: Path
    requests: int


def _run_in_parts_until(sim: Simulator, wh: Path, marker: str) -> tuple[Popen[str], list[str]]:
    """`esper-warehouse run` in parts, its log read until a line holds `marker` (at most 120 s):
    the process, still running, and the lines read."""
    proc = cli(sim, wh, "run", env={"SOURCES__ESPER__COMMIT_EVERY_DEVICES": str(PART)})
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    return proc, seen


def _kill_when(sim: Simulator, wh: Path, marker: str) -> None:
    """`esper-warehouse run` in parts, SIGKILLed once its log says `marker`."""
    proc, _ = _run_in_parts_until(sim, wh, marker)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Killed:
    """The killed first load, once for the module (as `in_parts`): the tests that resume it copy
    it beside their own fresh `sim`, which serves what the twin served."""
    warehouse = tmp_path_factory.mktemp("killed") / "warehouse.duckdb"
    with _twin() as twin:
        _kill_when(twin, warehouse, "part 2 committed")
        return Killed(warehouse, int(twin.stats()["total"]))


@dataclass(frozen=True)
class Resumed:
    """The killed first load resumed by a run of a fresh `_twin`: its warehouse and result."""

    warehouse: Path
    result: RunResult


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory, killed: Killed) -> Resumed:
    """The killed first load resumed, once for the module (as `in_parts`): what
    `load(sim, wh, source_options=PARTS)` gives on a fresh `sim` after the kill. The tests that go
    on from it copy it beside their own fresh `sim`."""
    warehouse = tmp_path_factory.mktemp("resumed") / "warehouse.duckdb"
    copy_warehouse(killed.warehouse, warehouse)
    with _twin() as twin:
        return Resumed(warehouse, load(twin, warehouse, source_options=PARTS))


def test_a_first_load_in_parts_equals_the_truth_and_so_does_the_nightly_after_it(
    sim, wh: Path, in_parts: InParts
) -> None:
    # the shared load stands for this one: `sim` is fresh and untouched, as its twin was
    assert sim.now == in_parts.result.as_of and sim.stats()["total"] == 0
    copy_warehouse(in_parts.warehouse, wh)
    first = copy.deepcopy(in_parts.result)
    assert first.exit_code == 0, first.error
    committed = [message for message in in_parts.logged if "committed" in message]
    assert len(committed) == -(-SMALL_FLEET // PART) and "part 1 committed" in committed[0]
    for table in TABLES:
        compare(sim, wh, table)
    census = {c[0] for c in rows(wh, "device_census", ("id",))}
    assert census == {d["id"] for d in sim.truth("devices")}  # written whole by the last part
    assert all(r["ok"] for r in first.reconciliation)

    sim.advance(hours=24)
    nightly = load(sim, wh, source_options=PARTS, resources=TABLES)  # the compared tables
    assert nightly.exit_code == 0 and nightly.mode == "incremental", nightly.error
    for table in TABLES:
        compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))


def test_a_first_load_killed_after_two_parts_goes_on_from_them(
    sim, wh: Path, in_parts: InParts, killed: Killed, resumed: Resumed
) -> None:
    """SIGKILL once two parts are committed; the next run reads only what was not committed."""
    assert in_parts.result.exit_code == 0, in_parts.result.error
    clean = in_parts.result.requests
    # fresh: it serves what the killed run's twin and the resuming run's twin served
    assert sim.now == resumed.result.as_of and sim.stats()["total"] == 0
    with duckdb.connect(str(killed.warehouse), read_only=True) as con:
        held = con.sql("select count(*) from esper.devices").fetchone()[0]  # type: ignore[index]
    assert 2 * PART <= held < SMALL_FLEET  # the two parts are in the warehouse, not the rest

    copy_warehouse(resumed.warehouse, wh)  # the resume, as `load(sim, wh, source_options=PARTS)`
    again = copy.deepcopy(resumed.result)
    assert again.exit_code == 0, again.error
    assert again.mode == "full"
    for table in TABLES:
        compare(sim, wh, table)
    assert all(r["ok"] for r in again.reconciliation)
    # the killed run's committed parts are not fetched again: both runs together cost about
    # a clean load (the part in flight, the lists re-read, one device-list walk more)
    spent = killed.requests + again.requests
    assert spent <= 1.15 * clean, (killed.requests, again.requests, clean)
    # and the next nightly is an ordinary incremental run (of the device list, which carries
    # the first load's progress)
    sim.advance(hours=24)
    nightly = load(sim, wh, source_options=PARTS, resources=["devices"])
    assert nightly.exit_code == 0 and nightly.mode == "incremental", nightly.error


def test_a_run_stopped_after_two_parts_is_recorded_and_says_what_was_committed(
    sim, wh: Path
) -> None:
    """SIGTERM once two parts are committed: the run is in `_esper_runs`, its message true."""
    proc, seen = _run_in_parts_until(sim, wh, "part 2 committed")
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=60)
    log = "".join(seen) + rest
    assert proc.returncode == 130, log
    assert "could not record the run" not in log, log
    assert "nothing of this run was loaded" not in log, log
    assert "part(s) of this full scan are committed" in log, log
    with duckdb.connect(str(wh), read_only=True) as con:
        runs = con.sql("select status, error, parts from esper._esper_runs").fetchall()
    assert [r[0] for r in runs] == ["interrupted"], runs
    assert runs[0][2] >= 2, runs  # its committed parts
    assert "committed" in runs[0][1], runs


def test_status_and_models_tell_an_unfinished_first_load(
    wh: Path, killed: Killed, resumed: Resumed, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed after two parts: `status` says the first load is unfinished and, as no run has
    loaded yet, that the night did not load (exit 8); `models` refuses.

    Both only read the warehouse, so the resume that follows is the module's (`resumed`), in a
    copy of its own."""
    from esper_warehouse.pipelines.commands import models as models_command
    from esper_warehouse.pipelines.exit_codes import Exit
    from esper_warehouse.pipelines.views import status

    copy_warehouse(killed.warehouse, wh)

    assert status.status(wh) == Exit.NOT_LOADED
    said, alarm = capsys.readouterr()
    assert "the first load is unfinished" in said and "device(s) loaded so far" in said, said
    assert "never recorded its end (killed or stopped)" in alarm, alarm
    assert "last good load: none, no run has loaded this warehouse yet" in alarm, alarm
    assert models_command.main(["--warehouse", str(wh)]) == Exit.UNFINISHED
    assert "no model was built" in capsys.readouterr().err
    with duckdb.connect(str(wh), read_only=True) as con:
        marts = con.sql(
            "select count(*) from information_schema.tables where table_schema = 'marts'"
        ).fetchone()[0]  # type: ignore[index]
    assert marts == 0

    assert resumed.result.exit_code == 0, resumed.result.error
    wh = wh.parent / "resumed" / wh.name
    copy_warehouse(resumed.warehouse, wh)
    assert status.status(wh) == 0
    assert "unfinished" not in capsys.readouterr().out
    assert models_command.main(["--warehouse", str(wh)]) == 0


def test_a_kill_during_the_last_part_leaves_the_census_to_the_resume(sim, wh: Path) -> None:
    """SIGKILL as the last part (the catalogues, the census) starts: the resume completes both.

    120 devices in parts of 40: the walk reaches the list's end within part 3, so part 4 is the
    last part. The census, the device cursor and `devices_full_scan_at` belong to it.
    """
    last = -(-SMALL_FLEET // PART) + 1
    _kill_when(sim, wh, f"extract: started (part {last},")

    resumed = load(sim, wh, source_options=PARTS)
    assert resumed.exit_code == 0, resumed.error
    assert resumed.mode == "full"  # the first load is finished, not taken for a nightly
    census = {c[0] for c in rows(wh, "device_census", ("id",))}
    assert census == {d["id"] for d in sim.truth("devices")}
    assert "devices" in {r["table_name"] for r in resumed.reconciliation}
    assert all(r["ok"] for r in resumed.reconciliation)
    for table in TABLES:
        compare(sim, wh, table)


def test_a_first_load_resumed_a_day_later_loses_no_event(sim, wh: Path, killed: Killed) -> None:
    """SIGKILL after two parts, the API's clock moves 24 h, the resume: every event is loaded.

    Devices of the committed parts whose `updated_at` did not move still have new events (and
    commands) in the gap; their feeds are read again. Also after the next nightly.
    """
    copy_warehouse(killed.warehouse, wh)
    sim.advance(hours=24)
    resumed = load(sim, wh, source_options=PARTS)
    assert resumed.exit_code == 0, resumed.error
    compare(sim, wh, "device_events")
    sim.advance(hours=24)
    # the events and the tables whose activity makes a device's feed read again
    nightly = load(sim, wh, source_options=PARTS, resources=[*ACTIVITY, "device_events"])
    assert nightly.exit_code == 0, nightly.error
    compare(sim, wh, "device_events")


# A small fleet (fewer devices than `commit_every_devices`) behind a slow server that refuses
# some requests: every answer 100 ms late, one request in twenty answered 503 (retried).
SLOW_FLEET = 300
SLOW = [
    {"kind": "latency", "ms": 100, "jitter_ms": 20},
    {"kind": "status", "status": 503, "probability": 0.05},
]


FAN_OUT_ROUTES = ("/device/{id}/app/", "/devices/{id}/device-apps/", "/download/eventfeed/")


def _held(wh: Path, table: str, key: tuple[str, ...], where: str = "") -> set[tuple]:
    return {tuple(str(v) for v in r) for r in rows(wh, table, key, where)}


def _truth(sim: Simulator, table: str, key: tuple[str, ...], devices: set[str]) -> set[tuple]:
    return {tuple(str(r[k]) for k in key) for r in sim.truth(table) if r["device_id"] in devices}


def test_a_slow_first_load_of_a_small_fleet_commits_by_time_and_a_kill_keeps_it(
    tmp_path: Path,
) -> None:
    """A first load of 300 devices (one part by their number) is committed after
    `commit_every_minutes` (0.6 s here); SIGKILLed after its first part, it keeps the devices
    read before the kill with their apps and feeds, and the next run completes it."""
    wh = tmp_path / "warehouse.duckdb"
    with Simulator(
        devices=SLOW_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as sim:
        sim.set_faults(SLOW)
        proc = cli(sim, wh, "run", env={"SOURCES__ESPER__COMMIT_EVERY_MINUTES": "0.01"})
        assert proc.stderr is not None
        deadline, seen = time.monotonic() + 60, []
        for line in proc.stderr:
            seen.append(line)
            if "part 1 committed" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGKILL)
        _, rest = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, "".join(seen) + rest  # killed, not ended

        with reading(wh):
            held = {d for (d,) in _held(wh, "devices", ("id",))}
            # a part ended by time: the fleet is below `commit_every_devices`
            assert 0 < len(held) < SLOW_FLEET, len(held)
            apps = _held(wh, "device_apps", ("device_id", "id"), "where _dlt_valid_to is null")
            events = _held(wh, "device_events", ("device_id", "id"))
        # the devices read before the kill are there with their apps and event feeds, whole
        assert apps == _truth(sim, "device_apps", ("device_id", "id"), held)
        assert events == _truth(sim, "device_events", ("device_id", "id"), held)

        sim.clear_faults()
        sim.reset_stats()
        resumed = load(sim, wh)
        assert resumed.exit_code == 0 and resumed.mode == "full", resumed.error
        assert all(r["ok"] for r in resumed.reconciliation), resumed.reconciliation
        with reading(wh):
            for table in TABLES:
                compare(sim, wh, table)  # every row once, none missing
        # the devices the killed run committed are not read again: about 2 requests (apps, feed)
        # for each of the others, some of which take a page more
        routes = sim.stats()["routes"]
        fan_outs = sum(n for route, n in routes.items() if route.endswith(FAN_OUT_ROUTES))
        assert fan_outs <= 2.5 * (SLOW_FLEET - len(held)), routes


@pytest.mark.parametrize(
    ("latency_ms", "in_flight", "minutes"),
    [(300, 4, 0.1), (100, 2, 0.05)],
    ids=["13-per-s-6-s", "20-per-s-3-s"],
)
def test_a_part_on_a_slow_api_is_committed_about_when_it_is_due(
    tmp_path: Path, latency_ms: int, in_flight: int, minutes: float
) -> None:
    """A first load behind an API answering about 13 (or 20) requests a second: the first part,
    due after 6 s (3 s), is committed within a few seconds of that, not after the fan-outs of
    two steps of 100 devices each (about 40 s at 12 requests a second)."""
    wh = tmp_path / "warehouse.duckdb"
    due = minutes * 60
    # the part's last fan-out requests, its normalize and its load, on 2 busy cores
    bound = due + 6.0
    with Simulator(
        devices=SLOW_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as sim:
        sim.set_faults([{"kind": "latency", "ms": latency_ms, "jitter_ms": latency_ms // 5}])
        env = {
            "SOURCES__ESPER__COMMIT_EVERY_MINUTES": str(minutes),
            "SOURCES__ESPER__INITIAL_CONCURRENCY": str(in_flight),
            "SOURCES__ESPER__MAX_CONCURRENCY": str(in_flight),
        }
        proc = cli(sim, wh, "run", env=env)
        assert proc.stderr is not None
        started = committed = None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "extract: started (part 1" in line:
                started = time.monotonic()
            if "part 1 committed" in line:
                committed = time.monotonic()
                break
            if started is not None and time.monotonic() > started + bound + 10:
                break
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        answered = sim.stats()["total"]
    assert started is not None, "".join(seen)
    assert committed is not None, (
        f"part 1, due after {due:.0f} s, not committed after {bound + 10:.0f} s"
    )
    took = committed - started
    assert took <= bound, (
        f"part 1 due after {due:.0f} s, committed after {took:.1f} s ({answered} requests)"
    )
    with reading(wh):
        held = {d for (d,) in _held(wh, "devices", ("id",))}
    assert 0 < len(held) < SLOW_FLEET, len(held)
