"""The house's size rules (issue 20): a newcomer reads a module in one sitting, a function on a
screen or two. No module over 500 lines in sources/, pipelines/ or simulator/ but the few named
with their reason in `LONGER_MODULES`; no function over 80 lines anywhere but bench/ (whose
scenarios are scripts). A size limit is a smell detector, not a shape to cut code to."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES = 500
FUNCTION_LINES = 80
# Modules that hold one concern whole and read best so, past MODULE_LINES: the length each may
# reach, and why (docs/decisions.md, "`http/` by concern"). Split by size, a request's path
# crossed nine modules.
LONGER_MODULES = {
    # the pace learnt from 429s: the cut, its trial judged question by question, the undo,
    # growth; its evidence is weather.py, the limit of requests in flight limiter.py
    "sources/esper/http/pacing.py": 560,
    # Esper Pipelines' eight tables and the two reads they share, each a chain of parents
    # (run -> stage run -> its lists; stage -> its lists -> their items): one API, one module
    "sources/esper/tables/pipelines.py": 520,
}


def _files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_no_module_of_the_product_is_over_500_lines() -> None:
    lines = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for p in _files("sources", "pipelines", "simulator", "esper_warehouse")
    }
    long = {name: n for name, n in lines.items() if n > LONGER_MODULES.get(name, MODULE_LINES)}
    assert long == {}, f"modules over {MODULE_LINES} lines (or their exception): {long}"
    # an exception that is no longer needed (or names a module that is gone) is removed
    unneeded = {m for m in LONGER_MODULES if lines.get(m, 0) <= MODULE_LINES}
    assert unneeded == set(), f"LONGER_MODULES entries not needed: {sorted(unneeded)}"


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
