"""Device states as Esper's own tools read them (live-observations section 22).

Onboarding (80-100) and applying a blueprint (110-190) are not yet in service; a record may carry
its state as text ("INACTIVE") instead of a code, and the load must neither fail nor lose it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED
from tests.pipeline.helpers import load

# The runs load the device list (with its history and census), not the whole tenant: a device's
# state, and so whether it counts, comes from it alone ("Scenario tests load the tables they
# check", docs/decisions.md); the models build over the other raw tables empty.
LOADED = ["devices"]

# Seed 7 with 400 devices holds onboarded (100) and applying-blueprint (150) devices; the small
# test fleet holds neither.
FLEET = 400

# How the drift fault serves each code as text; 150 becomes a word the vocabulary does not know.
TEXT = {"1": "online", "60": "INACTIVE", "20": "Disabled", "70": "WIPE_IN_PROGRESS",
        "80": "Onboarding", "150": "APPLYING_BLUEPRINT_STEP"}  # fmt: skip
TEXT_STATES = {"kind": "drift", "variant": "as_text", "route": "/v2/devices/", "field": "state",
               "names": TEXT}  # fmt: skip


@pytest.fixture
def sim(stopping: list[threading.Thread]) -> Iterator[Simulator]:
    server = Simulator(
        devices=FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
    ).start()
    try:
        yield server
    finally:
        stopping.append(threading.Thread(target=server.stop, name="stop-sim", daemon=True))
        stopping[-1].start()


def _marts(warehouse: Path) -> dict[str, tuple]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "select device_id, device_state, is_in_service, verdict from marts.fleet_compliance"
        ).fetchall()
        names = dict(
            con.execute(
                "select device_id, device_state_name from intermediate.int_devices_current"
            ).fetchall()
        )
    return {r[0]: (*r[1:], names[r[0]]) for r in rows}


def test_onboarding_and_blueprint_steps_are_out_of_service(sim, tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    result = load(sim, wh, build_models=True, resources=LOADED)
    assert result.exit_code == 0, result.error
    truth = {d["id"]: d["state"] for d in sim.truth("devices")}
    marts = _marts(wh)
    judged = {truth[i]: (in_service, verdict) for i, (_, in_service, verdict, _) in marts.items()}
    assert {80, 90, 100, 150} <= set(judged), "the fleet holds onboarding and blueprint steps"
    for state, (in_service, verdict) in judged.items():
        expected = state in (0, 1, 60, 200)
        assert in_service is expected, state
        assert (verdict == "out_of_service") is not expected, state


def test_text_states_load_as_their_codes_and_unknown_text_is_kept(sim, tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    sim.set_faults([TEXT_STATES])
    result = load(sim, wh, build_models=True, resources=LOADED)
    assert result.exit_code == 0, result.error
    truth = {d["id"]: d["state"] for d in sim.truth("devices")}
    marts = _marts(wh)
    assert set(marts) == set(truth), "every device loaded"
    seen_text = set()
    for device_id, (code, in_service, verdict, name) in marts.items():
        served = truth[device_id]
        if str(served) in TEXT and served != 150:
            assert code == served, (device_id, served, code)
            seen_text.add(served)
        if served == 150:
            assert code is None and name == "applying_blueprint_step"
            assert in_service, "a state the vocabulary does not know is never hidden"
            seen_text.add(served)
        if served in (20, 70, 80):
            assert verdict == "out_of_service"
    assert {1, 20, 60, 150} <= seen_text
    with duckdb.connect(str(wh), read_only=True) as con:
        kept = con.execute(
            "select count(*) from esper.devices where state_text = 'INACTIVE' and state = 60"
        ).fetchone()
    assert kept == (sum(1 for s in truth.values() if s == 60),)


def test_models_build_on_a_warehouse_loaded_before_state_text(
    sim, tmp_path: Path, first_load
) -> None:
    """A warehouse of an earlier release has no `state_text` until a load brings one; the models
    build anyway (the column is added, empty), and the next load fills it without a second add."""
    from esper_warehouse.pipelines.build.models import build_models

    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    with duckdb.connect(str(wh)) as con:
        con.execute("alter table esper.devices drop column state_text")
        con.execute("alter table esper.device_history drop column state_text")
    build_models(wh)
    sim.set_faults([TEXT_STATES])
    sim.advance(hours=2)
    result = load(sim, wh, build_models=True, resources=LOADED)
    assert result.exit_code == 0, result.error
