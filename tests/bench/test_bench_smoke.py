"""The benchmark harness runs end to end on a tiny fleet and writes its table (no timing asserted).

The generic alternative's runs are left out here (`--skip=generic`) to keep the test short; its
configuration is checked to build a dlt source without touching the network.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import COLUMNS, RUN_ROWS

REPO = Path(__file__).resolve().parents[2]
DEVICES = 50
EXPECTED_RUNS = (
    "pipeline_full",
    "io_floor",
    "duckdb_floor",
    "dlt_floor",
    "pipeline_nightly",
    "models",
)
SKIPPED_RUNS = (
    "pipeline_full_4",
    "generic_full",
    "pipeline_nightly_4",
    "generic_nightly",
)
FIGURES = ("wall_s", "requests", "rows", "rows_per_s", "peak_rss_mb", "cpu_s", "sim_peak_rss_mb")


# `make bench` runs the harness itself, and this test first (`pytest -m slow`); a change that
# breaks the harness is seen by whoever measures. Out of `make test` (docs/decisions.md, "The
# slow tier").
@pytest.mark.slow
def test_harness_runs_a_tiny_fleet_and_writes_its_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            f"--sizes={DEVICES}",
            "--profiles=none",
            "--skip=generic",
            "--build-devices=300",
            f"--readme={readme}",
            f"--results-dir={results}",
            "--run-timeout=120",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    data = json.loads((results / "latest.json").read_text())
    (scenario,) = data["scenarios"]
    assert scenario["devices"] == DEVICES and scenario["profile"] == "none"
    assert scenario["errors"] == []
    assert set(EXPECTED_RUNS) <= set(scenario["runs"])
    for label in EXPECTED_RUNS:
        run = scenario["runs"][label]
        assert all(key in run for key in FIGURES), (label, sorted(run))
        assert run["wall_s"] > 0
    assert not set(SKIPPED_RUNS) & set(scenario["runs"])
    for label in ("pipeline_full", "io_floor", "pipeline_nightly"):
        assert scenario["runs"][label]["requests"] > 0, label
    assert scenario["runs"]["pipeline_full"]["rows"] > 0
    assert scenario["runs"]["pipeline_nightly"]["share_of_full_requests"] is not None
    assert "io_floor_routes_differ" in scenario["checks"]
    for key in ("full_vs_io_floor", "rows_per_s_vs_duckdb_floor", "nightly_request_share"):
        assert scenario["ratios"][key] is not None, key

    text = readme.read_text()
    header = "| " + " | ".join(COLUMNS) + " |"
    assert header in text
    table = text.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    assert len(table) == len(RUN_ROWS), table
    assert all(row.count("|") == len(COLUMNS) + 1 for row in table)
    skipped = [row for row in table if "| skipped |" in row]
    assert len(skipped) == len(SKIPPED_RUNS), table
    assert "## Targets" in text and "not run" not in text

    # the model build on the synthetic warehouse (bench/modelbuild.py): its own section, with the
    # build of this checkout, its figures and its most expensive models
    section = text.split("## The model build at fleet scale (synthetic warehouse)", 1)[1]
    assert "300 devices" in section
    (row,) = [line for line in section.splitlines() if line.startswith("| this checkout (")]
    wall, cpu, rss, relations = (cell.strip() for cell in row.split("|")[2:6])
    assert float(wall) > 0 and float(cpu) > 0 and float(rss.replace(",", "")) > 0
    assert int(relations) > 50
    assert section.count("| `marts.") + section.count("| `intermediate.") >= 5


def test_generic_config_builds_the_four_resources() -> None:
    from dlt.sources.rest_api import rest_api_source

    from bench.generic import TABLES, generic_config

    source = rest_api_source(generic_config("http://127.0.0.1:9/api", "not-a-real-key"))
    assert set(source.resources) == set(TABLES)
