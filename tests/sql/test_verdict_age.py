"""A compliance verdict is as old as the oldest of the table families it reads.

`intermediate.int_verdict_families` declares them; here they are held to the raw tables the
verdict's checks read, through the model files (a model names the models it reads, a staging
view names its raw table), so a check that starts reading another family fails this test until
the declaration names it too.
"""

from __future__ import annotations

import re

import duckdb
from esper_warehouse.pipelines.build.model_files import LAYERS, SQL_DIR, load_models
from esper_warehouse.sources.esper.tables import FAMILY

MODELS = {model.relation: model.sql for layer in LAYERS for model in load_models(SQL_DIR, layer)}
NAMED = re.compile(r"\b((?:staging|intermediate|marts)\.\w+|esper\.\w+)")
COMMENT = re.compile(r"--[^\n]*")
# What the checks' models read that decides no verdict, and why.
NOT_JUDGED = {
    # the device's last command and its sender, shown beside the verdict
    "intermediate.int_device_last_command",
    # which devices are removed: a weekly full scan's census decides which devices are listed,
    # not how a listed one is judged (its family is behind between full scans by design)
    "esper.device_census",
}


def raw_tables_read(relation: str) -> set[str]:
    """The raw tables `relation` reads, directly or through the models it reads."""
    seen, todo, raw = set(), [relation], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in NAMED.findall(COMMENT.sub("", MODELS[current])):
            if name in NOT_JUDGED:
                continue
            if name.startswith("esper."):
                raw.add(name.removeprefix("esper."))
            elif name in MODELS:
                todo.append(name)
    return raw


def test_the_verdict_s_families_are_those_its_checks_read() -> None:
    read = {FAMILY[t] for t in raw_tables_read("intermediate.int_device_day_checks") if t in FAMILY}
    sql = MODELS["intermediate.int_verdict_families"]
    con = duckdb.connect(":memory:")
    declared = {family for (family,) in con.execute(sql).fetchall()}
    assert "catalogues" in read, "the blueprint check reads the catalogues"
    assert declared == read
