"""The house's size rules (issue 20): a newcomer reads a module in one sitting, a function on a
screen or two. No module over 500 lines in sources/, pipelines/ or simulator/; no function over
80 lines anywhere but bench/ (whose scenarios are scripts)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES = 500
FUNCTION_LINES = 80


def _files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_no_module_of_the_product_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _files("sources", "pipelines", "simulator", "esper_warehouse")
        if (n := len(p.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, f"modules over {MODULE_LINES} lines: {long}"


def test_no_function_is_over_80_lines() -> None:
    long = {}
    for path in _files(
        "sources", "pipelines", "simulator", "esper_warehouse", "tests", "notebooks"
    ):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}, f"functions over {FUNCTION_LINES} lines: {long}"
