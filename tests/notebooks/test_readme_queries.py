"""The README's "Worst command rollouts" query ranks as the demo's "three worst command rollouts"."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
from esper_warehouse.pipelines.demo import WORST_COMMAND_ROLLOUTS

ROOT = Path(__file__).resolve().parents[2]


def _readme_worst_rollouts() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"-- Worst command rollouts.*?\n(select .*?);", readme, re.S)
    assert match, "README has no 'Worst command rollouts' query"
    return match.group(1)


def test_readme_worst_rollouts_start_with_the_demos_three(demo_warehouse: Path) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_worst_rollouts()).fetchall()
        demo = con.execute(WORST_COMMAND_ROLLOUTS.format(marts="marts")).fetchall()
    assert len(demo) == 3
    assert [row[:3] for row in readme[:3]] == [row[:3] for row in demo]
