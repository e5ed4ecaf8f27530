"""The v2 status metrics: a daily snapshot that equals the simulator's counters after a load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.pipelines.build.models import build_models

from tests.pipeline.helpers import load

COUNTERS = [
    "recently_added",
    "low_battery",
    "under_provisioning",
    "unprovisioned_devices",
    "secure",
    "low_risk",
    "medium_risk",
    "high_risk",
    "total_devices_under_risk",
    "unspecified",
]
PERIODS = ("first_period", "second_period", "third_period")
# staging column <- raw column (the view only renames and casts)
STAGED = {
    "recently_added_devices": "recently_added",
    "low_battery_devices": "low_battery",
    "under_provisioning_devices": "under_provisioning",
    "unprovisioned_devices": "unprovisioned_devices",
    "secure_devices": "secure",
    "low_risk_devices": "low_risk",
    "medium_risk_devices": "medium_risk",
    "high_risk_devices": "high_risk",
    "devices_under_risk": "total_devices_under_risk",
    "unspecified_risk_devices": "unspecified",
    **{f"last_seen_{p}_devices": f"last_seen__{p}" for p in PERIODS},
}


def _expected(sim: Any) -> dict[str, Any]:
    """The simulator's counters now, as the raw table's columns."""
    (truth,) = sim.truth("status_metrics")
    row = {c: truth[c] for c in COUNTERS}
    row.update({f"last_seen__{p}": truth["last_seen"][p] for p in PERIODS})
    row["snapshot_date"] = sim.now.date().isoformat()
    row["as_of"] = sim.now
    return row


def _raw_rows(wh: Path) -> list[dict[str, Any]]:
    columns = ["snapshot_date", "as_of", *COUNTERS, *(f"last_seen__{p}" for p in PERIODS)]
    with duckdb.connect(str(wh), read_only=True) as con:
        found = con.execute(
            f"select {', '.join(columns)} from esper.status_metrics order by snapshot_date"
        ).fetchall()
    return [dict(zip(columns, r, strict=True)) for r in found]


def test_status_metrics_equal_the_truth_one_row_per_api_day(
    sim, tmp_path: Path, first_load
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)  # the default run loads it with every other table
    assert first.exit_code == 0, first.error
    assert first.rows.get("status_metrics") == 1
    day_one = _expected(sim)
    assert _raw_rows(wh) == [day_one]
    assert day_one["secure"] + day_one["total_devices_under_risk"] > 0  # a real fleet counted

    # Staging renames and casts only: the same numbers, the day as a DATE.
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        cur = con.execute("select * from staging.stg_esper__status_metrics")
        staged = [
            dict(zip([d[0] for d in cur.description], r, strict=True)) for r in cur.fetchall()
        ]
    assert len(staged) == 1
    assert str(staged[0]["snapshot_date"]) == day_one["snapshot_date"]
    assert staged[0]["measured_at"] == day_one["as_of"]
    assert {s: staged[0][s] for s in STAGED} == {s: day_one[r] for s, r in STAGED.items()}

    # A re-run the same API day replaces that day's row with the counters as of then.
    sim.advance(hours=3)
    assert sim.now.date().isoformat() == day_one["snapshot_date"]
    again = load(sim, wh, resources=["status_metrics"])
    assert again.exit_code == 0, again.error
    assert _raw_rows(wh) == [_expected(sim)]

    # The next API day adds a row and keeps the last one of the day before.
    kept = _raw_rows(wh)[0]
    sim.advance(hours=24)
    nightly = load(sim, wh, resources=["status_metrics"])
    assert nightly.exit_code == 0, nightly.error
    assert _raw_rows(wh) == [kept, _expected(sim)]
