"""The README's "Worst command rollouts" query ranks as marts.headlines (the demo's "three worst
command rollouts" and the report's "Most failing" table read the same `failing_rank`)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]


def _readme_worst_rollouts() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"-- Worst command rollouts.*?\n(select .*?);", readme, re.S)
    assert match, "README has no 'Worst command rollouts' query"
    return match.group(1)


def test_readme_worst_rollouts_start_with_the_headlines_three(demo_warehouse: Path) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_worst_rollouts()).fetchall()
        worst = con.execute(
            "select item_rank, label, denominator from marts.headlines "
            "where headline = 'worst_command_rollouts' order by item_rank"
        ).fetchall()
    assert len(worst) == 3
    assert [(row[0], row[1], row[3]) for row in readme[:3]] == worst
