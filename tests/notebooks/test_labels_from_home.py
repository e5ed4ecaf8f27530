"""One label, one home (issue 41): what a number counts is worded by marts.headlines or by a
vocabulary (sql/vocabulary/*.csv), and a notebook reads it from there, never types it again. A
label typed in a notebook drifts from its home ("Required app missing or outdated" on the
report's chart, "Required app below its minimum version" everywhere else)."""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build.model_files import SQL_DIR
from esper_warehouse.pipelines.views import report

from .drawn import charts, drawn_total, stacks


def _vocabulary_labels() -> set[str]:
    """Every `label` of a vocabulary (the reasons' words: reason_codes.csv)."""
    found = set()
    for path in sorted((SQL_DIR / "vocabulary").glob("*.csv")):
        with path.open(newline="") as f:
            rows = csv.DictReader(line for line in f if not line.startswith("#"))
            found |= {row["label"] for row in rows if row.get("label")}
    return found


def _homes(warehouse: Path) -> set[str]:
    """The labels that have a home: marts.headlines' (whole, and what they count without their
    "(of …)") and the vocabularies'; of two words or more (a single word, "Devices", is an
    axis's word as well as a label's)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        labels = {label for (label,) in con.execute("select label from marts.headlines").fetchall()}
    labels |= {re.sub(r" \([^()]*\)$", "", label) for label in labels}
    labels |= _vocabulary_labels()
    return {label for label in labels if len(label.split()) >= 2}


def _typed(notebook: Path) -> list[str]:
    """The text a notebook types: every string constant of its code (f-strings' literal parts),
    docstrings aside (they may quote a label to say where it comes from)."""
    tree = ast.parse(notebook.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_no_notebook_types_a_label_that_has_a_home(demo_warehouse) -> None:
    homes = _homes(demo_warehouse)
    assert "Required app below its minimum version" in homes  # the vocabulary is read
    assert "Compliant (of devices in service)" in homes  # marts.headlines is read
    typed = {
        (notebook.name, label)
        for notebook in [*report.notebooks(), report.NOTEBOOKS_DIR / "_common.py"]
        for text in _typed(notebook)
        for label in homes
        if label in text
    }
    assert typed == set(), f"labels typed in a notebook instead of read from their home: {typed}"


def test_the_reasons_chart_draws_the_headline_s_reasons_in_their_words(
    rendered, demo_warehouse
) -> None:
    """The report's reasons chart (the whole fleet: no filter) is marts.headlines' top_reasons:
    each reason under the vocabulary's label, its bar the headline's count."""
    title = "Why devices are non-compliant (a device can fail several checks)"
    view = charts(rendered.page("fleet_overview").dom)[title].view(title)
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        expected = dict(
            con.execute(
                "select label, value from marts.headlines where headline = 'top_reasons'"
            ).fetchall()
        )
    drawn = {reason: drawn_total(segments) for reason, segments in stacks(view).items()}
    assert drawn.keys() == expected.keys()
    for reason, devices in expected.items():
        assert abs(drawn[reason] - devices) <= view.axis("x").per_pixel, reason
