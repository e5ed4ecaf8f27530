"""The command line in subprocesses: crashes mid-run, exit codes, the key kept secret, locks."""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.warehouse import working_dir

from tests.conftest import API_KEY

from .helpers import TABLES, cli, compare, load, reading

EVENTS = "/enterprise/*/device/*/download/eventfeed/*"


def _wait_for(process: subprocess.Popen[str], marker: str, timeout: float = 120) -> list[str]:
    """Read the run's log lines until one contains `marker`."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stderr is not None
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"no {marker!r} in the run's log:\n{''.join(lines)}")


# Kills timed by the run's log: during extraction test_resume.py's kills and test_run_interrupt.py's
# Ctrl-C stay in `make test`, during the load test_run_kills.py's kills at set steps (the first
# job starting, the events committed). Both variants are in the slow tier (docs/decisions.md,
# "The slow tier").
@pytest.mark.slow
@pytest.mark.parametrize("phase", ["extract: started", "load: started"])
def test_killed_mid_run_then_rerun_equals_the_truth(sim, wh: Path, phase: str) -> None:
    sim.set_faults([{"kind": "latency", "route": EVENTS, "ms": 150}])  # a longer extraction
    process = cli(sim, wh, "run")
    _wait_for(process, phase)
    if phase.startswith("extract"):
        time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    _, rest = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    if phase.startswith("extract"):
        assert "extract: done" not in rest  # killed during extraction
    else:
        assert "load: done" not in rest  # killed during the load
    sim.clear_faults()
    result = load(sim, wh, resources=TABLES)  # after the killed whole run, the compared tables
    assert result.exit_code == 0, result.error
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)


def test_wrong_key_exit_2_one_request_and_a_clear_message(sim, wh: Path) -> None:
    wrong = "wrong-key-0123456789abcdef"
    process = cli(sim, wh, "run", key=wrong)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    assert "refused" in (out + err).lower() and "key" in (out + err).lower()
    assert sim.stats()["total"] == 1
    assert wrong not in out + err


def test_the_key_appears_nowhere(sim, wh: Path) -> None:
    process = cli(sim, wh, "-v", "run")
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    assert "DEBUG" in err  # the debug log was on
    assert API_KEY not in out + err
    files = [wh, *working_dir(wh).rglob("*")]
    leaked = [f for f in files if f.is_file() and API_KEY.encode() in f.read_bytes()]
    assert not leaked, f"the API key is written in {leaked}"
    sim.set_faults([{"kind": "status", "status": 401}])
    refused = load(sim, wh)
    assert refused.exit_code == 2 and API_KEY not in (refused.error or "")


def _hold(warehouse: Path) -> subprocess.Popen[str]:
    """Another process holding the warehouse open (read-only, as a notebook would) for a minute."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time\n"
         f"c = duckdb.connect({str(warehouse)!r}, read_only=True)\nprint('ready', flush=True)\n"
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


class LockAtFirstRequest(httpx.HTTPTransport):
    """Loopback transport: at the run's first request (the warehouse state is already read),
    another process opens the warehouse, so the lock is met by the load, after extraction."""

    def __init__(self, warehouse: Path) -> None:
        super().__init__()
        self.warehouse = warehouse
        self.holder: subprocess.Popen[str] | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.holder is None:
            self.holder = _hold(self.warehouse)
        return super().handle_request(request)

    def release(self) -> None:
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()


class ReleaseWhenWaiting(logging.Handler):
    """Releases the holder once the run logs that it waits for the lock."""

    def __init__(self, transport: LockAtFirstRequest) -> None:
        super().__init__()
        self.transport, self.fired = transport, False

    def emit(self, record: logging.LogRecord) -> None:
        if "locked by another process" in record.getMessage() and not self.fired:
            self.fired = True
            self.transport.release()


# What the lock tests' runs load after the shared first load: the tables they compare, with the
# lists they read ids from (`Table.needs`) ("Scenario tests load the tables they check",
# docs/decisions.md). Where the lock is met does not depend on it.
COMPARED = ("device_apps", "command_statuses", "operations")
LOADED = list(COMPARED)


def test_a_lock_taken_during_extraction_makes_the_load_wait(sim, wh: Path, first_load) -> None:
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    transport = LockAtFirstRequest(wh)
    waiting = ReleaseWhenWaiting(transport)
    logging.getLogger("esper_warehouse").addHandler(waiting)
    try:
        result = load(
            sim, wh, lock_timeout_s=60, client_options={"transport": transport}, resources=LOADED
        )
    finally:
        logging.getLogger("esper_warehouse").removeHandler(waiting)
        transport.release()
    assert waiting.fired  # the load met the lock, waited, and went on once it was released
    assert result.exit_code == 0, result.error
    with reading(wh):
        for table in COMPARED:
            compare(sim, wh, table)


def test_a_lock_outlasting_the_wait_after_extraction_loses_nothing(
    sim, wh: Path, first_load
) -> None:
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    transport = LockAtFirstRequest(wh)
    try:
        locked = load(
            sim, wh, lock_timeout_s=1.5, client_options={"transport": transport}, resources=LOADED
        )
    finally:
        transport.release()
    assert locked.exit_code == Exit.LOCKED and "held by another process" in locked.error
    after = load(sim, wh, resources=LOADED)  # the extracted, pending package first, then a run
    assert after.exit_code == 0, after.error
    with reading(wh):
        for table in COMPARED:
            compare(sim, wh, table)


def test_a_locked_warehouse_waits_then_fails_with_exit_5(sim, wh: Path, first_load) -> None:
    assert first_load(wh).exit_code == 0
    holder = _hold(wh)
    try:
        started = time.monotonic()
        result = load(sim, wh, lock_timeout_s=1.5, resources=LOADED)
        assert result.exit_code == Exit.LOCKED
        assert "held by another process" in result.error
        assert time.monotonic() - started >= 1.5  # it waited for the deadline
    finally:
        holder.kill()
        holder.wait()
    sim.advance(hours=24)
    after = load(sim, wh, resources=LOADED)
    assert after.exit_code == 0, after.error
    compare(sim, wh, "command_statuses")


def test_every_command_the_documents_name_exists() -> None:
    """`esper-warehouse <word>` in README.md or a page under docs/ (prose, tables, code blocks) is
    a subcommand, and the documents name every subcommand."""
    from esper_warehouse.pipelines.commands import SUBCOMMANDS

    from tests.docs import every_page

    def named(text: str) -> set[str]:
        return set(re.findall(r"esper-warehouse ([a-z][a-z_-]*)", text)) - {"command"}

    assert named(every_page()) - set(SUBCOMMANDS) == set()
    assert named(every_page()) == set(SUBCOMMANDS)  # and every subcommand is documented
