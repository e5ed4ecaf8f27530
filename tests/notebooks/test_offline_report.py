"""The exported report opens anywhere: in headless Chromium with the network off, every page
renders its charts and tables and the headline numbers of the marts it reads, and asks for
nothing over the network (admins open these files on locked-down machines and attach them to
tickets). Every table holds all its rows (the first ones open, the rest in a closed section a
click opens), or says "first N of M" and links the whole table beside the page."""

from __future__ import annotations

import csv
import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.views import report

from .browser import measured, open_offline
from .test_notebooks import session

NOTEBOOKS = report.notebooks()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_page_renders_with_the_network_off(rendered, notebook) -> None:
    opened = rendered.page(notebook.stem)
    assert opened.requests == [], "the page asked for the network"
    assert "<svg" in opened.dom and "<table" in opened.dom
    assert "marimo-" not in opened.dom, "a widget left that needs marimo's code"


def test_the_headline_numbers_are_on_the_offline_page(rendered, demo_warehouse) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        devices, compliant, non_compliant = con.execute(
            "select count(*), count(*) filter (where verdict = 'compliant'), "
            "count(*) filter (where verdict = 'non_compliant') from marts.fleet_compliance"
        ).fetchone()
    dom = rendered.page("fleet_overview").dom
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


@dataclass
class Shown:
    """One table as the page holds it: its rows open and closed, and what it says of the rest."""

    rows: list[list[str]] = field(default_factory=list)
    closed: int = 0  # rows inside the closed section
    section: str | None = None  # the id a link opens the closed section with
    says: str = ""  # its label and any "first N of M" note
    links: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # its header cells


class _Tables(HTMLParser):
    """The page's tables in order: a `<table>` outside a closed section starts one; the table in
    the `details.rows` after it holds its other rows."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Shown] = []
        self.label = ""
        self.in_details = self.in_label = self.in_note = False
        self.in_body = False
        self.cell: list[str] | None = None
        self.header: list[str] | None = None
        self.label_links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "details" and "rows" in classes:
            self.in_details = True
        elif tag == "table" and not self.in_details:
            self.tables.append(Shown(says=self.label, links=self.label_links))
            self.label, self.label_links = "", []
        elif tag == "div" and a.get("id", "").startswith("rows-") and self.tables:
            self.tables[-1].section = a["id"]
        elif tag == "p" and "label" in classes:
            self.in_label, self.label, self.label_links = True, "", []
        elif tag == "p" and "cut" in classes:
            self.in_note = True
        elif tag == "a" and (self.in_label or self.in_note):
            # a label's link belongs to the table after it, a note's to the table before
            links = self.tables[-1].links if self.in_note else self.label_links
            links.append(a.get("href", ""))
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body:
            if self.in_details:
                self.tables[-1].closed += 1
            else:
                self.tables[-1].rows.append([])
        elif tag == "td" and self.in_body:
            self.cell = []
        elif tag == "th" and not self.in_details and self.tables:
            self.header = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self.header is not None:
            self.tables[-1].columns.append("".join(self.header))
            self.header = None
        elif tag == "details":
            self.in_details = False
        elif tag == "p":
            self.in_label = self.in_note = False
        elif tag == "tbody":
            self.in_body = False
        elif tag == "td" and self.cell is not None:
            if not self.in_details:
                self.tables[-1].rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.header is not None:
            self.header.append(data)
        if self.cell is not None:
            self.cell.append(data)
        if self.in_label:
            self.label += data
        if self.in_note:
            self.tables[-1].says += " " + data


def _tables(dom: str) -> list[Shown]:
    reader = _Tables()
    reader.feed(dom)
    return reader.tables


def _table_totals(page: Path) -> list[int]:
    """Each table's rows as the notebook had them (marimo's `total-rows`), in page order."""
    found = []
    for cell in session(page)["cells"]:
        for output in cell["outputs"]:
            markup = output.get("data", {}).get("text/html", "")
            for tag in re.findall(r"<marimo-table\b[^>]*>", markup):
                total = re.search(r"data-total-rows='([^']*)'", tag)
                found.append(int(html.unescape(total.group(1))))
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_table_holds_all_its_rows_or_says_where_the_rest_are(
    rendered, report_run, notebook
) -> None:
    shown = _tables(rendered.page(notebook.stem).dom)
    totals = _table_totals(report_run.out / f"{notebook.stem}.html")
    assert len(shown) == len(totals) > 0
    for table, total in zip(shown, totals, strict=True):
        held = len(table.rows) + table.closed
        if held == total:
            continue
        cut = re.search(r"first ([\d,]+) of ([\d,]+) rows", table.says)
        assert cut, f"{notebook.stem}: a table holds {held} of its {total} rows and says nothing"
        assert int(cut.group(1).replace(",", "")) == held
        (link,) = table.links
        with (report_run.out / link).open(newline="") as f:
            assert sum(1 for _ in csv.reader(f)) - 1 == int(cut.group(2).replace(",", ""))


def test_a_click_opens_the_rest_of_a_table(report_run, rendered) -> None:
    """The closed section opens when asked: Chromium opens it to show a link's target."""
    table = next(t for t in _tables(rendered.page("fleet_overview").dom) if t.section)
    page = report_run.out / "fleet_overview.html"
    closed = re.search(
        rf'<details class="rows"[^>]*><summary>[^<]*</summary><div id="{table.section}"',
        rendered.page("fleet_overview").dom,
    )
    opened = re.search(
        rf'<details class="rows"[^>]*><summary>[^<]*</summary><div id="{table.section}"',
        open_offline(page, fragment=table.section).dom,
    )
    assert closed and "open" not in closed.group(0).split(">")[0]
    assert opened and "open" in opened.group(0).split(">")[0]


# Each open table of a page as Chromium lays it out: the right edge of the box it shows and of the
# page's text column, whether what it does not show scrolls, and how many lines its id cells take.
TABLE_BOXES = """
const main = document.querySelector('main').getBoundingClientRect();
const right = main.right - parseFloat(getComputedStyle(document.querySelector('main')).paddingRight);
return [...document.querySelectorAll('table')].filter(t => t.offsetParent).map(t => {
  const box = t.parentElement, columns = [...t.querySelectorAll('thead th')].map(th => th.textContent);
  const ids = columns.flatMap((c, i) => (c === 'id' || c.endsWith('_id')) ? [i + 1] : []);
  const cells = ids.flatMap(i => [...t.querySelectorAll(`tbody td:nth-child(${i})`)]);
  const lines = cells.map(td => {
    const range = document.createRange(); range.selectNodeContents(td);
    return range.getClientRects().length; });
  return {columns, shownRight: Math.min(box.getBoundingClientRect().right, t.getBoundingClientRect().right),
          pageRight: right, hidden: box.scrollWidth - box.clientWidth,
          scrolls: ['auto', 'scroll'].includes(getComputedStyle(box).overflowX), lines};
});
"""


@pytest.mark.parametrize("notebook", ["rollouts", "fleet_overview"])
def test_a_wide_table_scrolls_and_keeps_its_ids_on_one_line(report_run, tmp_path, notebook) -> None:
    """The commands', operations' and "who may act" tables are wider than the page: each stays
    inside the page's column and scrolls sideways, and an id (a UUID) reads on one line."""
    boxes = measured(report_run.out / f"{notebook}.html", TABLE_BOXES, tmp_path)
    assert any(box["hidden"] > 0 for box in boxes), "no table wider than the page: nothing tested"
    for box in boxes:
        assert box["shownRight"] <= box["pageRight"] + 1, box["columns"]
        assert box["hidden"] <= 0 or box["scrolls"], box["columns"]
        assert set(box["lines"]) <= {1}, (box["columns"], box["lines"])
    if notebook == "rollouts":
        assert any(box["lines"] for box in boxes), "no id column shown: nothing tested"


def test_the_long_tables_hold_every_row_of_their_mart(rendered, demo_warehouse) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        non_compliant, drift, ours_only, stale = con.execute(
            "select (select count(*) from marts.fleet_compliance where verdict = 'non_compliant'),"
            " (select count(*) from marts.drift_disagreements),"
            " (select count(*) from marts.drift_disagreements where disagreement = 'ours_only'),"
            " (select count(*) from marts.stale_devices)"
        ).fetchone()
    tables = _tables(rendered.page("fleet_overview").dom)
    held = sorted(len(t.rows) + t.closed for t in tables)
    assert non_compliant > 20 and drift > 20 and stale > 20, "the fixture's tables are long"
    for rows in (non_compliant, drift, stale):
        assert rows in held
    dom = rendered.page("fleet_overview").dom
    assert dom.count(">ours_only<") >= ours_only  # every disagreement, not only the first page
