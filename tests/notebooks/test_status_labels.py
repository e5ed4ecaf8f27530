"""`esper-warehouse status` says which figures are one run's and which are the whole table's."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.views.status import render


def test_status_labels_per_run_counts_apart_from_table_totals(demo_warehouse: Path) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        text = render(con, "esper")
    lines = text.splitlines()
    tables = next(i for i, line in enumerate(lines) if line.startswith("tables"))
    recon = next(i for i, line in enumerate(lines) if line.startswith("reconciliation"))
    assert "whole table" in lines[tables]
    assert "latest run only" in lines[recon] and "not the table totals" in lines[recon]
    per_run = [line for line in lines[recon + 1 :] if " expected " in line]
    assert per_run and all("this run: expected" in line for line in per_run)
    # the demo's nightly runs load fewer device_apps rows than the table holds: the case that misled
    totals = {
        line.split()[0]: int(line.split()[1].replace(",", "")) for line in lines[tables + 1 : recon]
    }
    apps = next(line for line in per_run if line.split()[0] == "device_apps")
    assert int(apps.split("loaded")[1].split()[0]) < totals["device_apps"]
