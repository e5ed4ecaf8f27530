"""README's quick start: every command `make demo` says to try next runs as pasted beside the
demo warehouse (marimo's editor, a server, is checked for its command and file)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from tests.notebooks.conftest import ReportRun

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("ends with the next things to try:", 1)[1]
    block = block.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_every_next_step_of_the_demo_runs_as_pasted(
    demo_warehouse: Path, report_run: ReportRun, tmp_path: Path
) -> None:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")
    (tmp_path / "demo.duckdb").symlink_to(demo_warehouse)
    commands = quick_start_commands()
    assert len(commands) == 4
    for command in commands:
        words = shlex.split(command)
        if words[1:2] == ["edit"]:  # marimo's editor serves until stopped: its parts exist
            assert (tmp_path / words[0]).is_file() and (tmp_path / words[2]).is_file()
        elif words[1:2] == ["report"]:  # exported once per test run from the same warehouse
            assert words[2:] == ["--warehouse", "demo.duckdb"]
            assert report_run.exit_code == 0, report_run.log[-2000:]
        else:
            done = subprocess.run(
                ["bash", "-e", "-c", command], cwd=tmp_path, capture_output=True, text=True,
                timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, f"{command}\n{done.stdout[-1000:]}{done.stderr[-2000:]}"
            assert done.stdout.strip()
