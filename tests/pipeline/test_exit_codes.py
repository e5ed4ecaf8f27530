"""Exit codes have one home, pipelines/exit_codes.py: the reference (docs/reference/exit-codes.md,
written from it) lists exactly its values with their meaning, the README's brief names only its
values, no command writes a code as a bare number, and every module says `Exit.<NAME>` (no
alias)."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

from esper_warehouse.pipelines.exit_codes import BRIEF, LOADED, MEANING, Exit, brief

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_lists_exactly_the_exit_codes_with_their_meaning() -> None:
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    table = page.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0]
    listed = dict(re.findall(r"^\| (\d+) \| (.*) \|$", table, re.M))
    assert {int(code) for code in listed} == {int(e) for e in Exit} == {int(e) for e in MEANING}
    assert all(listed[str(int(code))].replace("\\|", "|") == MEANING[code] for code in Exit)


def test_the_readme_s_brief_names_only_exit_codes() -> None:
    """README's "Scheduling" and "Every morning" give codes in bold (**6**): each is an `Exit`."""
    readme = (ROOT / "README.md").read_text()
    named = {int(code) for code in re.findall(r"\*\*(\d+)\*\*", readme)}
    assert named and named <= {int(e) for e in Exit}


def test_no_command_writes_an_exit_code_as_a_number() -> None:
    literal = re.compile(r"^\s*return \d+\s*$", re.M)
    found = {
        str(path.relative_to(ROOT)): literal.findall(path.read_text())
        for path in (ROOT / "pipelines").rglob("*.py")
        if path.name != "exit_codes.py"
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_help_lists_every_exit_code() -> None:
    assert set(BRIEF) == set(Exit)
    listed = [int(code) for code in re.findall(r"(\d+) [a-zA-Z]", brief())]
    assert listed == sorted({int(e) for e in Exit})


def test_a_scheduler_treats_ok_and_partial_as_loaded() -> None:
    assert set(LOADED) == {Exit.OK, Exit.PARTIAL} == {0, 6}


def test_every_module_names_an_exit_code_as_exit_dot_name() -> None:
    """No `EXIT_PARTIAL = Exit.PARTIAL`, `from ... import EXIT_PARTIAL` or use of one, anywhere:
    product, tests, bench, notebooks. A second name for a code is a second home to keep true
    (`EXIT_RECONCILIATION` was `Exit.UNFINISHED`, `EXIT_MISSING` was `Exit.CONFIG`)."""
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = {}
    for name in files:
        if not (ROOT / name).exists():
            continue
        tokens = tokenize.generate_tokens(io.StringIO((ROOT / name).read_text()).readline)
        aliases = sorted(
            {t.string for t in tokens if t.type == tokenize.NAME and t.string.startswith("EXIT_")}
        )
        if aliases:
            found[name] = aliases
    assert found == {}
