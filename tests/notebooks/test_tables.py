"""A table of the report is never cut without saying so: a notebook's table carries every row into
the report's page, and one longer than the page holds says "first N of M" and is written whole
beside it; the Data Tap page says which queries the last load ran, however they were configured;
durations read in hours and days."""

from __future__ import annotations

import csv
import html
import json
import re
from pathlib import Path

import duckdb
from esper_warehouse.pipelines import readable
from esper_warehouse.pipelines.views import offline

from .test_offline_report import _tables


def _label(table) -> str:
    """The label a marimo table shows, as the HTML the browser is given."""
    found = re.search(r"data-label='([^']*)'", table.text)
    return json.loads(html.unescape(found.group(1))) if found else ""


def _csv_rows(path: Path) -> int:
    with path.open(newline="") as f:
        return sum(1 for _ in csv.reader(f)) - 1


def test_in_the_report_a_table_carries_every_row(common, monkeypatch, tmp_path) -> None:
    import polars as pl

    monkeypatch.setenv(offline.REPORT_DIR_ENV, str(tmp_path))
    frame = pl.DataFrame({"device": [f"d{i}" for i in range(40)]})
    shown = common.table(frame, "devices", page_size=15)
    assert len(json.loads(shown._component_args["data"])) == 40  # what the page is given
    monkeypatch.delenv(offline.REPORT_DIR_ENV)
    paged = common.table(frame, "devices", page_size=15)
    assert len(json.loads(paged._component_args["data"])) == 15  # a notebook pages as before


def test_a_table_longer_than_the_page_holds_says_so_and_is_written_whole(
    common, monkeypatch, tmp_path, demo_warehouse
) -> None:
    import polars as pl

    monkeypatch.setenv(offline.REPORT_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(common.WAREHOUSE_ENV, str(demo_warehouse))
    monkeypatch.setattr(common, "TABLE_ROWS", 10)
    frame = pl.DataFrame({"device": [f"d{i}" for i in range(25)]})
    shown = common.table(frame, "devices")
    assert "first 10 of 25 rows" in _label(shown)
    assert 'href="devices.csv"' in html.unescape(_label(shown))  # linked beside the page
    assert _csv_rows(tmp_path / "devices.csv") == 25
    # a Data Tap table: the page shows a few rows, the file holds the whole table
    (total,) = (
        duckdb.connect(str(demo_warehouse), read_only=True)
        .execute("select count(*) from esper.data_tap__device_stats_daily")
        .fetchone()
    )
    whole = "select device_id, report_date from esper.data_tap__device_stats_daily"
    tap = common.table(frame.head(10), "data_tap__x", total=total, whole_sql=whole)
    assert f"first 10 of {total:,} rows" in _label(tap)
    assert _csv_rows(tmp_path / "data_tap__x.csv") == total


def test_every_group_names_the_devices_in_no_group(rendered, demo_warehouse, common) -> None:
    """The fleet page's "Every group" table: the devices whose group_path is NULL are a row
    named `NO_GROUP` (notebooks/_common.py), never a blank name."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        (ungrouped,) = con.execute(
            "select count(*) from marts.fleet_compliance where group_path is null"
        ).fetchone()
    assert ungrouped  # the demo's fleet has devices in no group
    groups = next(
        t
        for t in _tables(rendered.page("fleet_overview").dom)
        if t.columns[:2] == ["group_path", "devices"]
    )
    named = {row[0]: row[1] for row in groups.rows}
    assert "" not in named
    assert named[common.NO_GROUP] == f"{ungrouped:,}"


def test_an_empty_list_of_reasons_reads_as_nothing() -> None:
    """A device with no blueprint reason (Esper's drift only): its cell is empty, never `[]`."""
    rows = [{"device": "a", "blueprint_reasons": []}, {"device": "b", "blueprint_reasons": ["x"]}]
    (shown,) = _tables(offline.table_html(rows))
    assert [row[1] for row in shown.rows] == ["", '["x"]']


def test_the_offline_page_says_when_it_was_given_a_first_page_only() -> None:
    rows = [{"device": f"d{i}"} for i in range(15)]
    page = offline.table_html(rows, total=183)
    assert "first 15 of 183 rows" in page
    assert "first" not in offline.table_html(rows, total=15)


def test_data_tap_says_the_demo_s_query_ran_in_the_last_load(rendered, demo_warehouse) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        (ran,) = con.execute(
            "select rows from esper._esper_runs order by started_at desc limit 1"
        ).fetchone()
    loaded = json.loads(ran)["data_tap__device_stats_daily"]
    status = next(
        t for t in _tables(rendered.page("data_tap").dom) if t.rows[0][0] == "device_stats_daily"
    )
    _, _, last_load, _, configured_in = status.rows[0]
    assert last_load == f"{loaded:,} rows"
    assert configured_in and configured_in not in ("false", "False")


def test_durations_read_in_minutes_hours_or_days(rendered) -> None:
    assert [readable.duration(m) for m in (None, 45, 200, 1_440, 3_600, 10_080)] == [
        "–",
        "45 min",
        "3.3 h",
        "24 h",
        "2.5 days",
        "7 days",
    ]
    dom = rendered.page("rollouts").dom
    assert "minutes_to_terminal" not in dom and "minutes_since" not in dom
    assert re.search(r"<td>\d+(\.\d)? (h|days)</td>", dom)  # a p90 as a person reads it
