"""Device `state` follows the spec's DeviceStateEnum per platform, in a realistic mix.

The compliance marts leave devices being wiped (70), onboarding (80, 90), provisioning (30-50) or
disabled (20) out of their denominators; the fleet must hold such devices for that to be
exercised, and only in the codes their platform knows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
import pytest
from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import _initial_state

SUBSET = Path(__file__).resolve().parents[2] / "docs" / "spec" / "esper-openapi-subset.json"
SCHEMAS = json.loads(SUBSET.read_text())["components"]["schemas"]
ENUMS = {
    plat: set(SCHEMAS[f"DeviceStateEnum{plat.title()}"]["enum"])
    for plat in ("ANDROID", "APPLE", "WINDOWS", "LINUX")
}


def _mix(plat: int) -> Counter[int]:
    """The state of a device for 100,000 evenly spread draws: the generator's exact mix."""
    return Counter(_initial_state((k + 0.5) / 100_000, plat) for k in range(100_000))


def test_the_mix_per_platform_uses_only_the_platforms_codes() -> None:
    for plat, name in enumerate(C.PLATFORMS):
        mix = _mix(plat)
        assert set(mix) <= ENUMS[name], name
        assert mix[1] / 100_000 > 0.9, "mostly online"
        assert {20, 70, 80, 90, 100, 200} <= set(mix), name
    android = _mix(C.ANDROID)
    assert {30, 40, 50, 60, 150} <= set(android)
    assert 0.01 < android[60] / 100_000 < 0.05
    assert 60 not in _mix(C.APPLE)


def test_the_spec_meaning_of_70_and_80() -> None:
    """70 = factory reset / wipe in progress, 80 = onboarding in progress (the spec's enum)."""
    text = SCHEMAS["DeviceStateEnum"]["description"]
    assert "70 = Device is undergoing a Factory Reset" in text
    assert "80 = Device Onboarding in Progress" in text
    assert (C.STATE_WIPE, C.STATE_ONBOARDING) == (70, 80), "live §22: 70 wipe, 80 onboarding"


def test_served_states_are_in_the_platform_enum(client: httpx.Client) -> None:
    content = client.get("/v2/devices/", params={"limit": 1000}).json()["content"]
    items = content["results"]
    assert len(items) == content["count"], "the whole fleet on one page"
    for item in items:
        assert isinstance(item["state"], int)
        assert item["state"] in ENUMS[item["platform"]], f"not in the subset's enum: {item}"
    assert len({i["state"] for i in items}) >= 4, "a mix, not only 1 and 20"


def test_the_simulator_serves_a_fleet_of_the_live_tenant_s_size() -> None:
    """The live tenant held 142,632 devices; the bound used to stop at 100,000 (the bench's
    150,000-device row builds one; generating it here would take 20 s)."""
    from esper_warehouse.simulator.core import MAX_DEVICES, MIN_DEVICES, Simulator

    assert MAX_DEVICES >= 150_000 > 142_632
    for outside in (MIN_DEVICES - 1, MAX_DEVICES + 1):
        with pytest.raises(ValueError, match=rf"{MIN_DEVICES}\.\.{MAX_DEVICES}"):
            Simulator(devices=outside)
