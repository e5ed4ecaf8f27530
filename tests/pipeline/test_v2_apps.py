"""The v2 app catalogue: the raw table and its staging view equal the simulator's list."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.models import build_models

COLUMNS = ["app_version_id", "app_id", "name", "package_name", "version_name", "file_size_in_kb"]


def test_v2_apps_equal_the_truth_and_are_staged(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)
    assert first.exit_code == 0, first.error
    truth = sorted(sim.truth("v2_apps"), key=lambda a: a["app_version_id"])
    assert len(truth) > 20  # more than one page of 20: the list is read to its end
    assert first.rows.get("v2_apps") == len(truth)
    with duckdb.connect(str(wh), read_only=True) as con:
        raw = con.execute(
            f"select {', '.join(COLUMNS)} from esper.v2_apps order by app_version_id"
        ).fetchall()
    assert raw == [tuple(a[c] for c in COLUMNS) for a in truth]

    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        staged = con.execute(
            "select app_version_id, app_name, created_at is not null "
            "from staging.stg_esper__v2_apps order by app_version_id"
        ).fetchall()
    assert staged == [(a["app_version_id"], a["name"], True) for a in truth]
