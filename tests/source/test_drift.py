"""Esper's own drift and security state beside the warehouse's: the device fields are staged,
`fleet_compliance` carries them, and `marts.drift_disagreements` lists the devices where Esper's
drift verdict and the blueprint check differ (set to differ on purpose here)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.views.status import morning_check
from esper_warehouse.simulator.drift import set_drift

from tests.pipeline.helpers import load


def _rows(wh: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_esper_verdicts_are_staged_as_served(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    build_models(wh)
    served = {
        d["id"]: (d.get("drift_state"), d.get("drift_severity")) for d in sim.truth("devices")
    }
    staged = _rows(
        wh, "select device_id, esper_drift_state, esper_drift_severity from marts.fleet_compliance"
    )
    assert {device: (state, severity) for device, state, severity in staged} == {
        device: served[device] for device, _s, _v in staged
    }
    assert {state for state, _v in served.values()} >= {0, 1}  # both verdicts occur
    named = dict(
        _rows(wh, "select distinct esper_drift_state, esper_drift_state_name "
              "from marts.fleet_compliance where esper_drift_state is not null")
    )  # fmt: skip
    assert named == {0: "in_sync", 1: "drifted"}


def test_devices_whose_two_verdicts_differ_are_listed(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    build_models(wh)
    before = dict(_rows(wh, "select device_id, disagreement from marts.drift_disagreements"))
    agreeing = _rows(
        wh,
        "select device_id, is_blueprint_in_sync from marts.fleet_compliance "
        "where is_esper_drifted = not is_blueprint_in_sync order by device_id",
    )
    in_sync = [d for d, ours in agreeing if ours]
    drifted = [d for d, ours in agreeing if not ours]
    assert len(in_sync) >= 2 and drifted, "the simulator's fleet has both kinds of agreement"
    # Esper now reports drift on a device the blueprint check passes, in sync on one it fails,
    # and a code nobody has documented on a third.
    set_drift(sim.world, in_sync[0], 1, 3)
    set_drift(sim.world, drifted[0], 0, 0)
    set_drift(sim.world, in_sync[1], 7, 2)
    assert load(sim, wh, resources=["devices"]).exit_code == 0  # updated_at moved: read again
    build_models(wh)
    after = {
        device: (kind, severity, reasons)
        for device, kind, severity, reasons in _rows(
            wh,
            "select device_id, disagreement, esper_drift_severity, blueprint_reasons "
            "from marts.drift_disagreements",
        )
    }
    assert after[in_sync[0]] == ("esper_only", 3, [])
    assert after[drifted[0]][0] == "ours_only"
    assert after[drifted[0]][2], "the blueprint check's reasons are shown"
    assert all(r.startswith("blueprint") for r in after[drifted[0]][2])
    assert after[in_sync[1]][:2] == ("esper_code_unknown", 2)
    assert {d: k for d, (k, _s, _r) in after.items()} == {
        **before,
        in_sync[0]: "esper_only",
        drifted[0]: "ours_only",
        in_sync[1]: "esper_code_unknown",
    }
    # the compliance verdict itself is the warehouse's: Esper's code does not change it
    (verdict_changed,) = _rows(
        wh,
        f"select is_esper_drifted, is_blueprint_in_sync from marts.fleet_compliance "
        f"where device_id = '{in_sync[0]}'",
    )
    assert verdict_changed == (True, True)
    # what `esper-warehouse status` and the demo print: the counts of the mart, by kind
    counts = _rows(wh, "select disagreement, count(*) from marts.drift_disagreements group by 1")
    with duckdb.connect(str(wh), read_only=True) as con:
        (line,) = [line for line in morning_check(con) if "drift verdicts differ" in line]
    assert all(f"{n:,} {kind}" in line for kind, n in counts), line
