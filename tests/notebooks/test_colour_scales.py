"""The notebooks' colour scales come from the state vocabulary, so no outcome is drawn invisible."""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _terminal_states() -> set[str]:
    with (ROOT / "sql" / "vocabulary" / "work_states.csv").open(newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["state"] for r in rows if r["is_terminal"] == "true"}


def test_every_terminal_state_has_a_colour_in_the_outcome_scale(common: ModuleType) -> None:
    scale = common.outcome_color().to_dict()["scale"]
    domain, colours = scale["domain"], scale["range"]
    assert _terminal_states() | {"pending"} <= set(domain)  # cancelled was missing: drawn invisible
    assert len(colours) == len(domain) and len(set(colours)) == len(colours)


def test_a_state_the_vocabulary_gains_gets_a_colour(common: ModuleType, tmp_path: Path) -> None:
    vocabulary = tmp_path / "work_states.csv"
    vocabulary.write_text(
        "kind,api_state,state,is_terminal\ncommand,SUCCESS,success,true\n"
        "command,REJECTED,rejected,true\n"
    )
    assert common._terminal_states(vocabulary) == ["success", "rejected"]


def test_rollout_tables_show_rates_as_percentages(common: ModuleType) -> None:
    import polars as pl

    view = pl.DataFrame(
        {"id": ["a"], "failing_rank": [1], "label": ["CLEAR_APP_DATA"], "failure_rate": [0.4],
         "timeout_rate": [0.0], "p90_minutes_to_terminal": [10.0]}
    )  # fmt: skip
    failing, _ = common.worst_rollouts(view, "command requests", ranked_from=5)
    shown = str(failing._component_args)  # what the table sends to the browser
    assert "40.0%" in shown and "0.4000" not in shown
