"""Fixtures of the simulator tests: one read-only simulator per module and an HTTP client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[Simulator]:
    """A 300-device simulator shared by the tests of a module that only read from it."""
    with Simulator(devices=300, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as s:
        yield s


def make_client(sim: Simulator, key: str | None = API_KEY) -> httpx.Client:
    """An httpx client on the simulator's base URL, authenticated with ``key``."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=sim.base_url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def client(shared_sim: Simulator) -> Iterator[httpx.Client]:
    """An authenticated client of ``shared_sim``."""
    with make_client(shared_sim) as c:
        yield c
