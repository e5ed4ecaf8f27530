"""The rollouts page's Pipelines section when Esper Pipelines could not be read: a key without
`read:pipeline` (the simulator's 403 on `/pipelines/*`, loaded for real) gives a page that says
so, naming the scope and the tables skipped, and draws no run. And the flags the section draws
(stalled, failing) hold their definitions on the demo warehouse, which has both."""

from __future__ import annotations

import html
import re
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.views import report
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED
from tests.pipeline.helpers import load
from tests.source.test_pipelines import expected_flags, expected_rollout

from .browser import open_offline
from .test_notebooks import cell_errors


@pytest.fixture(scope="module")
def refused_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rollouts page of a first load whose key the Pipelines routes refuse."""
    root = tmp_path_factory.mktemp("refused")
    warehouse = root / "refused.duckdb"
    with Simulator(devices=20, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/*"}])
        result = load(sim, warehouse, build_models=True)
    assert "pipeline_runs" in result.unavailable, result.unavailable
    export = report.export_notebook(report.NOTEBOOKS_DIR / "rollouts.py", root, warehouse)
    assert export.ok, export.errors[-3000:]
    return export.html


def test_a_key_without_read_pipeline_is_named_on_the_page(refused_page: Path) -> None:
    assert cell_errors(refused_page) == []
    opened = open_offline(refused_page)
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", opened.dom)))
    section = text[text.index("Pipelines An admin stages") : text.index("App versions")]
    assert "The last load could not read Esper Pipelines" in section
    assert "answered 403" in section and "read:pipeline" in section
    assert "pipeline_runs" in section and "pipeline_target_runs" in section
    assert "Pipeline runs not ended, stage by stage" not in text  # no chart of nothing
    assert "runs not ended" not in section  # and no tiles counting nothing


def test_the_fixture_s_stalled_and_failing_stages_are_the_definitions(demo_warehouse) -> None:
    """The demo warehouse (two days on) holds a stalled run; its flags in marts.pipeline_rollout
    are the warehouse guide's definitions worked out in Python over the raw tables, as the simulator's
    records are in tests/source/test_pipelines.py."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:

        def truth(table: str) -> list[dict]:
            return con.execute(f"select * from esper.{table} order by id").pl().to_dicts()

        order = dict(con.execute("select id, stage_order from esper.pipeline_stages").fetchall())
        (as_of,) = con.execute("select as_of from intermediate.int_as_of").fetchone()
        flags = expected_flags(truth, order, expected_rollout(truth, order), as_of)
        drawn = con.execute(
            "select pipeline_run_id, stage_order, is_stalled, is_failing "
            "from marts.pipeline_rollout"
        ).fetchall()
    assert {(r, o): (s, f) for r, o, s, f in drawn} == flags
    assert any(s for s, _ in flags.values()) and any(f for _, f in flags.values())
