"""Every number knows its age, table by table: credentials and operations refused keep their
figures at the time they were read, a family held back too long makes `status` exit 7, a family
never loaded is unknown (never 0), a Data Tap table skipped is a family behind with its reason
(docs/guide/warehouse.md, "How old is a number"). The families refused after a good night: test_freshness.py."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views import report
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.sources.esper.tables import FAMILY
from esper_warehouse.sources.esper.tables.credentials import PROVISIONING_PROFILES

from tests.routes import glob

from .helpers import load
from .test_freshness import headlines, refused_night


def test_credentials_expiry_is_counted_at_the_time_the_credentials_were_read(
    sim, wh: Path, modelled_first_load
) -> None:
    modelled_first_load(wh)
    query = (
        "select credential_kind, credential_id, days_left, status, age_note "
        "from marts.credential_expiry order by 1, 2"
    )
    with duckdb.connect(str(wh), read_only=True) as con:
        before = con.execute(query).fetchall()
    refused_night(
        sim, wh, ("/tenant/v0/*", glob(PROVISIONING_PROFILES) + "*"), family="credentials"
    )
    with duckdb.connect(str(wh), read_only=True) as con:
        after = con.execute(query).fetchall()
    assert [row[:4] for row in after] == [row[:4] for row in before]
    assert all(row[4] and "2 days old" in row[4] for row in after)


def test_a_family_held_back_longer_than_the_warning_age_makes_status_exit_7(
    sim, wh: Path, first_load, capsys
) -> None:
    first_load(wh)
    refused_night(sim, wh, ("/pipelines/v0/*",), hours=72, family="pipelines")
    capsys.readouterr()
    assert status(wh) == Exit.HELD_BACK
    captured = capsys.readouterr()
    assert "HELD BACK: as of" in captured.out
    assert "warning: Pipelines held back: as of" in captured.err


def test_a_first_load_without_pipelines_says_unknown_never_0(sim, wh: Path, capsys) -> None:
    """The first load reads the refused family and the families of the compliance numbers (the
    devices and the catalogues a verdict reads) alone: no other family plays a part in what the
    pipelines' numbers say."""
    sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/v0/*"}])
    read = [t for t, family in FAMILY.items() if family in ("pipelines", "devices", "catalogues")]
    result = load(sim, wh, build_models=True, resources=read)
    assert result.exit_code == Exit.PARTIAL, result.error

    rows = headlines(wh, "pipeline_runs_%")
    assert {row[0] for row in rows} == {
        "pipeline_runs_waiting",
        "pipeline_runs_stalled",
        "pipeline_runs_failing",
    }
    for _, item, value, denominator, is_known, data_as_of, note in rows:
        assert item is None and value is None and denominator is None and not is_known
        assert data_as_of is None
        day = f"{result.as_of:%Y-%m-%d}"
        assert note == (
            f"Pipelines: unknown (never loaded: GET /pipelines/v0/runs/ refused (403) since {day})"
        )
    # the compliance numbers, their families loaded in the same run, are known
    assert all(row[4] for row in headlines(wh, "compliance_rate"))

    capsys.readouterr()
    assert status(wh) == Exit.OK  # unknown since the first load: said, not a warning
    shown = capsys.readouterr().out
    assert (
        "Esper Pipelines runs not ended (marts.pipeline_rollout): Pipelines: unknown (never "
        f"loaded: GET /pipelines/v0/runs/ refused (403) since {day})"
    ) in shown


def test_operations_refused_keep_their_figures_and_their_age(
    sim, wh: Path, modelled_first_load
) -> None:
    modelled_first_load(wh)
    query = (
        "select operation_id, target_devices, success_devices, pending_devices, age_note "
        "from marts.operation_rollout order by 1"
    )
    with duckdb.connect(str(wh), read_only=True) as con:
        before = con.execute(query).fetchall()
    assert before and all(row[4] is None for row in before)
    refused_night(sim, wh, ("/v0/operations/*",), family="operations")
    with duckdb.connect(str(wh), read_only=True) as con:
        after = con.execute(query).fetchall()
    assert [row[:4] for row in after] == [row[:4] for row in before]
    assert all("GET /v0/operations/ refused (403)" in row[4] for row in after)


def test_a_data_tap_table_skipped_is_a_family_behind_with_its_reason(
    sim, wh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from esper_warehouse.sources.esper.tables import data_tap as datatap

    monkeypatch.setattr(
        datatap, "run_query", functools.partial(datatap.run_query, sleep=lambda _: None)
    )
    options = {"data_tap_queries": {"battery": "select device_id from devices"}}
    first = load(sim, wh, resources=["data_tap__battery"], source_options=options)
    assert first.exit_code == Exit.OK, first.error
    sim.advance(48)
    sim.set_faults([{"kind": "query_canceled", "route": "/data-tap/v0/queries/*"}])
    second = load(
        sim, wh, resources=["data_tap__battery"], source_options=options, build_models=True
    )
    assert second.exit_code == Exit.PARTIAL, second.error
    with duckdb.connect(str(wh), read_only=True) as con:
        row = con.execute(
            "select family_label, data_as_of, is_behind, held_back_by, age_note "
            "from intermediate.int_family_freshness where family = 'data_tap__battery'"
        ).fetchone()
    assert row[:4] == ("Data Tap battery", first.as_of, True, "data_tap__battery")
    assert row[4].startswith(f"as of {first.as_of:%Y-%m-%d %H:%M} UTC (2 days old: ")
    assert "CANCELED" in row[4] and "since " in row[4]


def _report_freshness(wh: Path) -> pl.DataFrame:
    """The report's freshness table (notebooks/_common.py: it imports marimo, so only here)."""
    sys.path.insert(0, str(report.NOTEBOOKS_DIR))
    import _common

    return _common.freshness(wh)


def _commands_freshness(wh: Path) -> tuple[Any, ...]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(
            "select data_as_of, last_whole_load_at, age_note "
            "from intermediate.int_family_freshness where family = 'commands'"
        ).fetchone()


def test_a_family_never_loaded_says_so_without_a_last_whole_load(sim, wh: Path, capsys) -> None:
    """Command statuses refused from the first night while the requests load: the family was never
    loaded whole, so no surface gives it a "last whole load" (the requests' own is not the
    family's), on the first load and after a nightly still refused."""
    sim.set_faults([{"kind": "status", "status": 403, "route": "/commands/v0/status/*"}])
    read = [t for t, family in FAMILY.items() if family == "commands"]
    first = load(sim, wh, build_models=True, resources=read)
    assert first.exit_code == Exit.PARTIAL, first.error
    day = f"{first.as_of:%Y-%m-%d}"
    expected = f"unknown (never loaded: GET /commands/v0/status/ refused (403) since {day})"
    for night in ("first", "nightly"):
        if night == "nightly":
            sim.advance(24)
            nightly = load(sim, wh, build_models=True, resources=read)
            assert nightly.exit_code == Exit.PARTIAL, nightly.error
        assert _commands_freshness(wh) == (None, None, expected), night
        rows = headlines(wh, "worst_command_rollouts")
        assert rows and all(row[6] == f"Commands: {expected}" for row in rows), rows
        capsys.readouterr()
        status(wh)
        shown = [line for line in capsys.readouterr().out.splitlines() if "Commands " in line]
        assert any(expected in line for line in shown), shown
        assert not any("last whole load" in line for line in shown), shown
        shown_row = _report_freshness(wh).row(by_predicate=pl.col("family") == "Commands")
        assert shown_row[2:4] == (None, expected), shown_row  # the report's freshness table
