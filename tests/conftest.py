"""Shared fixtures: a simulator on loopback and a temporary warehouse file.

Every test talks only to 127.0.0.1. Parts-specific fixtures live in the conftest.py of each test folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

API_KEY = "sim-test-key-0123456789abcdef"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
SMALL_FLEET = 120
SEED = 7


@pytest.fixture
def sim() -> Iterator[object]:
    """A fresh simulator with a small fleet, served on a free loopback port."""
    from simulator import Simulator

    with Simulator(
        devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ) as server:
        yield server


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """Path of a DuckDB file that does not exist yet, in a per-test folder."""
    return tmp_path / "warehouse.duckdb"
