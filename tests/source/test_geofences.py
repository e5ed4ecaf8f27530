"""Geofences: the raw table and its staging view equal the simulator's list; a tenant without the
feature (403) loads everything else."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.sources.esper.tables.catalogues import GEOFENCES

from tests.pipeline.helpers import load
from tests.routes import glob

COLUMNS = ["id", "name", "latitude", "longitude", "radius", "radius_unit", "device_count"]


def test_geofences_equal_the_truth_and_are_staged(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)
    assert first.exit_code == 0, first.error
    truth = sorted(sim.truth("geofences"), key=lambda g: g["id"])
    assert len(truth) >= 3
    assert first.rows.get("geofences") == len(truth)
    with duckdb.connect(str(wh), read_only=True) as con:
        raw = con.execute(
            f"select {', '.join(COLUMNS)} from esper.geofences order by id"
        ).fetchall()
    assert raw == [tuple(g[c] for c in COLUMNS) for g in truth]

    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        staged = con.execute(
            "select geofence_id, geofence_name, radius, enterprise_id, created_at is not null "
            "from staging.stg_esper__geofences order by geofence_id"
        ).fetchall()
    assert staged == [(g["id"], g["name"], g["radius"], sim.enterprise_id, True) for g in truth]


def test_a_tenant_without_geofences_loads_everything_else(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 403, "route": glob(GEOFENCES) + "*"}])
    sim.advance(hours=24)
    # geofences and another list; a whole tenant with one route refused is test_partial_tenant's
    nightly = load(sim, wh, resources=["geofences", "groups"])
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"geofences"}
    with duckdb.connect(str(wh), read_only=True) as con:  # the earlier list is kept
        assert con.execute("select count(*) from esper.geofences").fetchone()[0] >= 3
