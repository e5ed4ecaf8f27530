"""The exported report opens anywhere: in headless Chromium with the network off, every page
renders its charts and tables and the headline numbers of the marts it reads, and asks for
nothing over the network (admins open these files on locked-down machines and attach them to
tickets)."""

from __future__ import annotations

import duckdb
import pytest
from esper_warehouse.pipelines import report

from .browser import open_offline

NOTEBOOKS = report.notebooks()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_page_renders_with_the_network_off(report_run, notebook) -> None:
    opened = open_offline(report_run.out / f"{notebook.stem}.html")
    assert opened.requests == [], "the page asked for the network"
    assert "<svg" in opened.dom and "<table" in opened.dom
    assert "marimo-" not in opened.dom, "a widget left that needs marimo's code"


def test_the_headline_numbers_are_on_the_offline_page(report_run, demo_warehouse) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        devices, compliant, non_compliant = con.execute(
            "select count(*), count(*) filter (where verdict = 'compliant'), "
            "count(*) filter (where verdict = 'non_compliant') from marts.fleet_compliance"
        ).fetchone()
    dom = open_offline(report_run.out / "fleet_overview.html").dom
    for number in (devices, compliant, non_compliant):
        assert f">{number:,}<" in dom, number
    assert dom.count("<svg") >= 5, "one drawing per chart"


def test_marimo_s_own_page_needs_the_network_which_is_why_the_offline_one_exists(
    report_run,
) -> None:
    opened = open_offline(report_run.out / "fleet_overview.interactive.html")
    assert any("cdn.jsdelivr.net" in url for url in opened.requests)


def test_the_index_opens_offline_and_links_both_kinds_of_page(report_run) -> None:
    opened = open_offline(report_run.out / "index.html")
    assert opened.requests == []
    for notebook in NOTEBOOKS:
        assert f'href="{notebook.stem}.html"' in opened.dom
