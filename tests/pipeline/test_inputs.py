"""A run's inputs read as the README says, and are refused before any request when they cannot
be: one Data Tap poll wait, the load's memory limit, the enterprise id; and a command whose
output's reader stops early (`status | head`) ends quietly."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.pipeline import source_settings
from esper_warehouse.pipelines.run.types import RunSettings
from esper_warehouse.sources.esper.tables import data_tap as datatap

from .helpers import ROOT, cli, load, rows

QUERY = "select device_id, report_date from devices"


@pytest.mark.parametrize(("given", "read"), [("5", (5.0,)), ("0.5", (0.5,)), ("5,10", (5.0, 10.0))])
def test_data_tap_poll_s_reads_one_wait_or_several(monkeypatch, given: str, read: tuple) -> None:
    monkeypatch.setenv("SOURCES__ESPER__DATA_TAP_POLL_S", given)
    tenant = {
        "api_key": "k" * 20,
        "base_url": "https://t-api.esper.cloud/api",
        "enterprise_id": "e",
    }
    assert source_settings(RunSettings(source_options=tenant)).data_tap_poll_s == read


def test_one_poll_wait_is_the_wait_between_every_poll(sim, tmp_path: Path, monkeypatch) -> None:
    """`DATA_TAP_POLL_S=5` ended the run with `ValueError: 5` (dlt typed the text itself, by the
    default's type); it reads as [5]: every poll after 5 s."""
    waits: list[float] = []
    monkeypatch.setattr(
        datatap, "run_query", functools.partial(datatap.run_query, sleep=waits.append)
    )
    monkeypatch.setenv("SOURCES__ESPER__DATA_TAP_POLL_S", "5")
    wh = tmp_path / "warehouse.duckdb"
    result = load(sim, wh, resources=["data_tap__ids"],
                  source_options={"data_tap_queries": {"ids": QUERY}})  # fmt: skip
    assert result.exit_code == Exit.OK, result.error
    assert waits and set(waits) == {5.0}, waits
    assert rows(wh, "data_tap__ids", ("device_id",))


@pytest.mark.parametrize("limit", ["lots", "512 parsecs", "0"])
def test_a_memory_limit_duckdb_refuses_is_exit_2_before_any_request(
    sim, tmp_path: Path, limit: str
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    result = load(sim, wh, load_memory_limit=limit)
    assert result.exit_code == Exit.CONFIG, result.error
    assert f"load_memory_limit {limit!r} is not a memory size" in (result.error or "")
    assert "ESPER_WAREHOUSE__LOAD_MEMORY_LIMIT" in (result.error or "")
    assert sim.stats()["total"] == 0, "requests were sent before the setting was checked"


def test_a_memory_limit_duckdb_accepts_loads(sim, tmp_path: Path) -> None:
    result = load(sim, tmp_path / "w.duckdb", load_memory_limit="300MB", resources=["groups"])
    assert result.exit_code == Exit.OK, result.error


@pytest.mark.parametrize(
    ("eid", "message"),
    [
        ("", "no enterprise id: set SOURCES__ESPER__ENTERPRISE_ID"),
        ("   ", "no enterprise id: set SOURCES__ESPER__ENTERPRISE_ID"),
        ("../v2", "the enterprise id '../v2' is not one"),
    ],
)
def test_an_unusable_enterprise_id_is_exit_2_before_any_request(
    sim, tmp_path: Path, eid: str, message: str
) -> None:
    process = cli(sim, tmp_path / "w.duckdb", "run", env={"SOURCES__ESPER__ENTERPRISE_ID": eid})
    out, err = process.communicate(timeout=120)
    assert process.returncode == Exit.CONFIG, err[-2000:]
    assert message in out + err, (out + err)[-2000:]
    assert "Traceback" not in err
    assert sim.stats()["total"] == 0


def test_an_enterprise_id_with_spaces_around_it_loads(sim, tmp_path: Path) -> None:
    from tests.conftest import ENTERPRISE_ID

    env = {"SOURCES__ESPER__ENTERPRISE_ID": f"  {ENTERPRISE_ID} \n"}
    process = cli(sim, tmp_path / "w.duckdb", "run", "--resources", "groups", env=env)
    _, err = process.communicate(timeout=120)
    assert process.returncode == Exit.OK, err[-2000:]


def test_status_into_a_reader_that_stopped_reading_ends_quietly(
    tmp_path: Path, shared_first_load: Any
) -> None:
    """`esper-warehouse status | head`: the reader has gone before the output is written."""
    wh = tmp_path / "esper_warehouse.duckdb"
    shutil.copy(shared_first_load.warehouse, wh)  # a loaded one: status has lines to write
    build_models(wh)
    process = subprocess.Popen(
        [sys.executable, "-m", "esper_warehouse.pipelines.cli", "status", "--warehouse", str(wh)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # `head` has read what it wanted
    err = process.stderr.read()
    assert process.wait(timeout=60) == Exit.OUTPUT_CLOSED, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
