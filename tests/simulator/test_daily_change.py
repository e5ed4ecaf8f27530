"""A simulated day changes about 2 % of the fleet, whatever its size (the nightly-load scenario)."""

from __future__ import annotations

import pytest
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED


def _daily_changes(devices: int, days: int) -> list[tuple[int, int, int]]:
    """Per simulated day: (devices before, of them with a new updated_at, with a new last_seen)."""
    out = []
    sim = Simulator(devices=devices, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID)
    for _ in range(days):
        before = {d["id"]: d for d in sim.truth("devices")}
        sim.advance(hours=24)
        after = {d["id"]: d for d in sim.truth("devices")}
        kept = [(before[k], after[k]) for k in before.keys() & after.keys()]
        changed = sum(a["updated_at"] != b["updated_at"] for b, a in kept)
        seen = sum(a.get("last_seen") != b.get("last_seen") for b, a in kept)
        out.append((len(before), changed, seen))
    return out


def test_a_day_changes_about_two_percent_of_a_2000_device_fleet():
    for n, changed, seen in _daily_changes(2000, days=3):
        assert 0.015 * n <= changed <= 0.03 * n, f"{changed} of {n} devices changed in a day"
        assert seen > 3 * changed  # check-ins move last_seen, not updated_at


@pytest.mark.parametrize("devices", [60, 300])
def test_a_small_fleet_still_changes_a_few_devices_a_day(devices):
    days = _daily_changes(devices, days=3)
    assert all(1 <= changed <= 0.1 * n for n, changed, _ in days), days
