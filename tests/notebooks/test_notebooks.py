"""Every notebook runs headless against a freshly loaded demo warehouse, as CI and `make report` do.

marimo 0.25 signals a failing cell in `marimo export html` by exiting 1 ("Export was successful,
but some cells failed to execute.") and by an output of type "error" in the session stored in the
page; cells skipped because an ancestor called `mo.stop` are not failures. Both are checked.
"""

from __future__ import annotations

import html
import json
import struct
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.views import offline, report

NOTEBOOKS = report.notebooks()
# Errors marimo shows on purpose: cells below an `mo.stop`, or interrupted.
INTENTIONAL = {"ancestor-stopped", "ancestor-prevented", "interruption"}


def session(page: Path) -> dict:
    """The run recorded in an exported page: every cell's outputs, as the browser shows them.

    `report/<name>.html` is the offline page written from it; marimo's own page, which records
    the session, is `<name>.interactive.html`."""
    if not page.name.endswith(".interactive.html"):
        page = page.with_name(page.name.removesuffix(".html") + ".interactive.html")
    return offline.session_of(page)


def cell_errors(page: Path) -> list[str]:
    return [
        f"{cell['id']}: {output.get('ename')}: {output.get('evalue')}"
        for cell in session(page)["cells"]
        for output in cell["outputs"]
        if output["type"] == "error" and output.get("ename") not in INTENTIONAL
    ]


def outputs(page: Path, mimetype: str) -> list[str]:
    return [
        output["data"][mimetype]
        for cell in session(page)["cells"]
        for output in cell["outputs"]
        if output["type"] == "data" and mimetype in output["data"]
    ]


def charts(page: Path) -> dict[str, dict]:
    """The altair charts a cell shows directly, by title (of the chart or of its sub-charts)."""
    found = {}
    for spec in map(json.loads, outputs(page, "application/vnd.vegalite.v6+json")):
        for part in [spec, *spec.get("hconcat", []), *spec.get("vconcat", [])]:
            title = part.get("title")
            title = title.get("text") if isinstance(title, dict) else title
            if title:
                found[title] = spec
    return found


def shown_text(page: Path) -> str:
    """Everything the page's cells display (markdown, HTML, charts), HTML entities decoded."""
    parts = [
        value if isinstance(value, str) else json.dumps(value)
        for cell in session(page)["cells"]
        for output in cell["outputs"]
        if output["type"] == "data"
        for value in output["data"].values()
    ]
    text = "\n".join(parts)
    for _ in range(3):  # outputs nest escaped HTML inside attributes
        text = html.unescape(text.replace("&#92;", "\\"))
    return text


def test_the_report_writes_one_page_per_notebook(report_run):
    pages = sorted(p.name for p in report_run.out.glob("*.html"))
    assert pages == sorted(
        [
            *(f"{nb.stem}.html" for nb in NOTEBOOKS),
            *(f"{nb.stem}.interactive.html" for nb in NOTEBOOKS),
            "index.html",
        ]
    )
    index = (report_run.out / "index.html").read_text(encoding="utf-8")
    for nb in NOTEBOOKS:
        assert f'href="{nb.stem}.html"' in index
        assert f'href="{nb.stem}.interactive.html"' in index
    assert report_run.exit_code == 0, report_run.log


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_without_a_cell_error(report_run, notebook):
    page = report_run.out / f"{notebook.stem}.html"
    assert page.exists(), report_run.log
    assert cell_errors(page) == []
    assert "Failed to get mimebundle" not in report_run.log  # a chart that could not render


def test_fleet_overview_shows_the_fleet_in_the_warehouse(report_run, demo_warehouse):
    page = report_run.out / "fleet_overview.html"
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        devices = con.execute("select count(*) from marts.fleet_compliance").fetchone()[0]
        days = con.execute(
            "select count(distinct day) from marts.fleet_compliance_daily"
        ).fetchone()[0]
    shown = charts(page)
    assert {"Devices by platform", "Verdict by platform", "Devices by last check-in"} <= set(
        shown
    ), sorted(shown)
    # The headline count is the warehouse's own, and the trend has one point per loaded day.
    assert f"{devices:,}" in shown_text(page)
    trend = shown["Compliance rate (compliant ÷ devices in service)"]
    rate_points = next(
        rows for rows in trend["datasets"].values() if rows and "compliance_rate" in rows[0]
    )
    assert len(rate_points) == days >= 2
    # The morning check: every expired or expiring credential of the warehouse is listed.
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        soon = con.execute(
            "select credential_name from marts.credential_expiry "
            "where status in ('expired', 'expiring')"
        ).fetchall()
        disagreeing = con.execute(
            "select device_name from marts.drift_disagreements "
            "order by disagreement, group_path, device_name limit 5"  # the table's first page
        ).fetchall()
    assert soon and all(name in shown_text(page) for (name,) in soon)
    assert "Where Esper and the warehouse disagree on drift" in shown_text(page)
    assert disagreeing and all(name in shown_text(page) for (name,) in disagreeing)
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        wipers = con.execute("select email from marts.fleet_access where can_wipe").fetchall()
    assert "Who may act on the fleet" in shown_text(page)
    assert wipers and all(email in shown_text(page) for (email,) in wipers)


def test_rollouts_shows_adoption_commands_and_a_drill_down(report_run):
    text = shown_text(report_run.out / "rollouts.html")
    for title in (
        "Apps now: share of reporting devices on the latest version",
        "Version adoption over time",
        "Command outcomes per request",
        "Time to completion of command requests, slowest first",
        "Operation outcomes",
        "Devices of",
    ):
        assert title in text, title


def test_report_writes_the_readme_charts_as_png(report_run):
    for _, _, filename in report.CHARTS:
        image = report_run.charts / filename
        assert image.exists(), f"{filename} not written\n{report_run.log}"
        header = image.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", header[16:24])
        assert width > 300 and height > 150


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_missing_warehouse_is_explained_not_an_error(missing_run, notebook):
    page, missing_path = missing_run[notebook.stem], missing_run["path"]
    assert page.ok, page.errors
    assert cell_errors(page.html) == []
    text = "".join(outputs(page.html, "text/html") + outputs(page.html, "text/markdown"))
    # as a reader sees it: the callout's attribute, then the path's own character references
    # (notebooks/_common.py `code`: a path is shown as text, never read as markdown)
    text = html.unescape(html.unescape(text))
    assert "No warehouse yet" in text
    assert str(missing_path) in text
    assert "make demo" in text


def test_a_failing_cell_fails_the_export(tmp_path, demo_warehouse):
    broken = tmp_path / "broken.py"
    broken.write_text(
        "import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n"
        "    fleet = {}\n    fleet['devices']\n    return\n",
        encoding="utf-8",
    )
    result = report.export_notebook(broken, tmp_path, demo_warehouse)
    assert not result.ok
    assert "some cells failed to execute" in result.errors
    assert "'devices'" in result.errors
    assert cell_errors(result.html)  # the page records the failing cell too


def test_data_tap_shows_the_demo_s_incremental_query(report_run, demo_warehouse):
    """The demo configures a Data Tap query, so the notebook has a table to explore after it."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        total, days = con.execute(
            "select count(*), count(distinct report_date) from esper.data_tap__device_stats_daily"
        ).fetchone()
    assert total > 0 and days >= 2, "one row per device and day, several days kept"
    text = shown_text(report_run.out / "data_tap.html")
    assert "esper.data_tap__device_stats_daily" in text
    assert f"{total:,} rows" in text
    assert "Ask your own question" in text


def test_models_of_an_earlier_release_are_named_not_an_error(tmp_path, demo_warehouse):
    """A warehouse whose models an earlier release built (here: without a macro the pages read)
    opened before the next run: each page says to rebuild the models, with no cell error."""
    from tests.conftest import copy_warehouse

    wh = tmp_path / demo_warehouse.name
    copy_warehouse(demo_warehouse, wh)
    with duckdb.connect(str(wh)) as con:
        con.execute("drop macro rollout_ranked_from_devices")
    for notebook in ("rollouts.py", "fleet_overview.py"):
        page = report.export_notebook(report.NOTEBOOKS_DIR / notebook, tmp_path, wh)
        assert page.ok, page.errors
        assert cell_errors(page.html) == []
        text = html.unescape(html.unescape(shown_text(page.html)))
        assert "The models are from an earlier release" in text, notebook
        assert "rollout_ranked_from_devices" in text
        assert f"esper-warehouse models --warehouse {wh}" in text
