"""Shared fixtures: a simulator on loopback and a temporary warehouse file.

Every test talks only to 127.0.0.1. Parts-specific fixtures live in the conftest.py of each test folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

API_KEY = "sim-test-key-0123456789abcdef"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
SMALL_FLEET = 120
SEED = 7


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
