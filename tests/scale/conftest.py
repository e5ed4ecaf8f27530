"""Fixtures of the growing tests: several simulated tenants and a tenants file naming them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ENTERPRISE_ID

# name -> devices; `gamma` refuses the key the tenants file points at (401)
FLEETS = {"alpha": 60, "beta": 120, "gamma": 200}


def write_tenants(path: Path, sims: dict[str, object], warehouse_dir: Path) -> Path:
    """A tenants file for the simulators, each tenant's key in `ESPER_TEST_KEY_<NAME>`."""
    lines = [f'warehouse_dir = "{warehouse_dir}"', ""]
    for name, sim in sims.items():
        lines += [
            f"[tenants.{name}]",
            f'base_url = "{sim.base_url}"',  # type: ignore[attr-defined]
            f'enterprise_id = "{ENTERPRISE_ID}"',
            f'api_key_env = "ESPER_TEST_KEY_{name.upper()}"',
            "",
        ]
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def tenant_sims(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """Three simulators on loopback (60, 120, 200 devices); gamma's key is not the one we hold."""
    from esper_warehouse.simulator import Simulator

    sims: dict[str, object] = {}
    try:
        for name, devices in FLEETS.items():
            key = API_KEY if name != "gamma" else "another-key-entirely-0000"
            sims[name] = Simulator(
                devices=devices, seed=7, api_key=key, enterprise_id=ENTERPRISE_ID
            ).start()
            monkeypatch.setenv(f"ESPER_TEST_KEY_{name.upper()}", API_KEY)
        yield sims
    finally:
        for sim in sims.values():
            sim.stop()  # type: ignore[attr-defined]
