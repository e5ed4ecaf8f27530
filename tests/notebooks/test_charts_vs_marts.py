"""Each chart's numbers, read from the Vega-Lite spec the exported notebook shows, equal SQL over
the marts: stacked totals are the devices of the day, outcome shares cover every target device,
and the headline compliance rate uses the trend chart's definition."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path

import duckdb

from tests.notebooks.test_notebooks import charts, session, shown_text


def _rows(spec: dict, *fields: str) -> list[dict]:
    return next(
        rows for rows in spec["datasets"].values() if rows and all(f in rows[0] for f in fields)
    )


def test_devices_by_verdict_stacks_every_device_of_the_day(
    report_run, demo_warehouse: Path
) -> None:
    spec = charts(report_run.out / "fleet_overview.html")["Devices by verdict"]
    per_day: dict[object, int] = defaultdict(int)
    for row in _rows(spec, "verdict", "devices"):
        per_day[row["day"]] += row["devices"] or 0
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        expected = [
            r[0]
            for r in con.execute(
                "select sum(devices + out_of_service_devices) from marts.fleet_compliance_daily "
                "group by day order by day"
            ).fetchall()
        ]
    assert [per_day[day] for day in sorted(per_day)] == expected
    assert "out_of_service" in {row["verdict"] for row in _rows(spec, "verdict", "devices")}


def _embedded_charts(page: Path) -> list[dict]:
    """Vega-Lite specs a cell shows inside a layout (vstack/hstack): marimo mime renderers."""
    found = []
    for cell in session(page)["cells"]:
        for output in cell["outputs"]:
            markup = output.get("data", {}).get("text/html", "")
            for match in re.finditer(
                r"<marimo-mime-renderer data-mime='([^']*)' data-data='([^']*)'", markup
            ):
                if "vegalite" in html.unescape(match.group(1)):
                    data = json.loads(html.unescape(match.group(2)))
                    found.append(json.loads(data) if isinstance(data, str) else data)
    return found


def test_rollout_outcome_bars_cover_every_target_device(report_run) -> None:
    specs = [
        s for s in _embedded_charts(report_run.out / "rollouts.html")
        if "outcomes" in str(s.get("title", "")).lower()
    ]  # fmt: skip
    assert specs
    for spec in specs:
        domain = set(spec["encoding"]["color"]["scale"]["domain"])
        totals: dict[str, int] = defaultdict(int)
        targets: dict[str, int] = {}
        for row in _rows(spec, "outcome", "devices", "target_devices"):
            assert row["outcome"] in domain, row  # an outcome outside the scale is not drawn
            totals[row["label"]] += row["devices"]
            targets[row["label"]] = row["target_devices"]
        assert totals == targets  # each rollout's drawn shares sum to 100 %


def test_headline_compliance_rate_has_the_trend_charts_definition(
    report_run, demo_warehouse: Path
) -> None:
    page = report_run.out / "fleet_overview.html"
    assert "Compliance rate (compliant ÷ devices in service)" in charts(page)
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        rate, in_service = con.execute(
            "select count(*) filter (where verdict = 'compliant')::double"
            " / count(*) filter (where verdict <> 'out_of_service'), "
            "count(*) filter (where verdict <> 'out_of_service') from marts.fleet_compliance"
        ).fetchone()
    assert f"{rate:.1%} of {in_service:,} devices in service" in shown_text(page)


def test_not_seen_headline_counts_the_stale_devices_table(report_run, demo_warehouse: Path) -> None:
    text = shown_text(report_run.out / "fleet_overview.html")
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        stale = con.execute("select count(*) from marts.stale_devices").fetchone()[0]
        label = con.execute(
            "select label from marts.headlines where headline = 'not_seen_devices' and item is null"
        ).fetchone()[0]
    headline = re.search(
        rf"data-value='\"([\d,]+)\"' data-label='\"{re.escape(label.removesuffix(' (or never)'))}",
        text,
    )
    assert headline and headline.group(1) == f"{stale:,}"
    assert f"{label}: {stale:,} devices</strong>" in text  # the table below
