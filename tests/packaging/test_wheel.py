"""The package a user installs with pipx or ``uv tool install`` works away from the checkout.

The wheel is built and installed twice with the locked dependencies: by README's own `uv tool
install` line (with the `notebooks` extra), and bare into a fresh virtual environment. Both run
from empty folders, one holding a dlt project's own ``sources/`` and ``pipelines/`` packages,
which must not shadow the tool's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).parent / "uv")  # a dev dependency (pyproject.toml)
STEP = re.compile(
    r"^  (explore in a notebook|query with SQL|export the report|see the runs)\s+(.*)$"
)


def _user_env(**extra: str) -> dict[str, str]:
    """This environment as a user's shell has it: Python writes the bytecode it compiles, so each
    later process of the tool reads it back. Where PYTHONDONTWRITEBYTECODE is set (uv installs
    no bytecode), every process of `report` compiled marimo, altair and polars from source
    again: ~15 CPU-s more for the test, nothing it checks."""
    env = {**os.environ, **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _uv(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        [UV, *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `dist/` (the built wheel) and the locked requirements, with and without
    the extras."""
    work = tmp_path_factory.mktemp("wheel")
    _uv("build", "--wheel", "--quiet", "--out-dir", str(work / "dist"), cwd=ROOT)
    for name, extras in (("requirements.txt", []), ("constraints.txt", ["--all-extras"])):
        _uv("export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--quiet",
            *extras, "--output-file", str(work / name), cwd=ROOT)  # fmt: skip
    return work


@pytest.fixture(scope="module")
def installed(work: Path) -> Path:
    """The wheel alone (no extra) in a fresh venv with the locked runtime dependencies; its bin
    folder."""
    _uv("venv", "--quiet", "--python", sys.executable, str(work / "venv"), cwd=work)
    wheel = next((work / "dist").glob("esper_warehouse-*.whl"))
    python = work / "venv" / "bin" / "python"
    _uv("pip", "install", "--quiet", "--python", str(python), "-r", str(work / "requirements.txt"),
        str(wheel), cwd=work)  # fmt: skip
    return python.parent


def readme_install_line() -> list[str]:
    """README's `uv tool install ...` line (Quick start), as words."""
    readme = (ROOT / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("uv tool install "))
    return shlex.split(line.split("#", 1)[0])


@pytest.fixture(scope="module")
def tool(work: Path) -> dict[str, str]:
    """The tool installed by README's line, run where `uv build --wheel` wrote `dist/`, pinned to
    the lock (`--constraints`); the environment whose PATH finds it, as uv's bin folder does."""
    words = readme_install_line()
    built = next((work / "dist").glob("esper_warehouse-*.whl"))
    assert words[3] == f"dist/{built.name}[notebooks]", "README names the wheel uv build writes"
    env = _user_env(UV_TOOL_DIR=str(work / "tools"), UV_TOOL_BIN_DIR=str(work / "bin"))
    _uv(*words[1:], "--python", sys.executable, "--constraints", str(work / "constraints.txt"),
        cwd=work, env=env)  # fmt: skip
    env["PATH"] = f"{work / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def _steps(text: str) -> dict[str, str]:
    """The demo's next steps: label -> what it says to run."""
    return {m[1]: m[2] for line in text.splitlines() if (m := STEP.match(line))}


def _exists(command: str, cwd: Path, env: dict[str, str]) -> bool:
    first = shlex.split(command)[0]
    if "/" in first:
        return (cwd / first).is_file()
    return shutil.which(first, path=env["PATH"]) is not None


def test_the_wheel_claims_one_import_name_and_ships_what_the_code_reads(work: Path):
    wheel = next((work / "dist").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"esper_warehouse"}
    for shipped in (
        "esper_warehouse/sql/marts/fleet_compliance.sql",
        "esper_warehouse/sql/vocabulary/device_states.csv",
        "esper_warehouse/docs/spec/live-shapes.json",
        "esper_warehouse/notebooks/fleet_overview.py",
    ):
        assert shipped in names


def test_the_tool_installed_as_readme_says_runs_the_demo_its_next_steps_and_the_report(
    tool: dict[str, str], tmp_path: Path
):
    """From an empty folder beside a user's dlt project: the demo, every next step it names is a
    command this installation has, and `report` renders every page."""
    for shadow in ("sources", "pipelines", "simulator"):  # a dlt project's own packages
        (tmp_path / shadow).mkdir()
        (tmp_path / shadow / "__init__.py").write_text(
            f"raise ImportError('the user\\'s {shadow}')"
        )

    def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=tool
        )

    done = run("esper-warehouse", "demo", "--devices", "100", "--days", "1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Compliance (marts.headlines), of the" in done.stdout
    with duckdb.connect(str(tmp_path / "demo.duckdb"), read_only=True) as con:
        devices = con.sql("select count(*) from marts.fleet_compliance").fetchone()[0]
    assert devices >= 100
    steps = _steps(done.stdout)
    assert set(steps) == {"explore in a notebook", "query with SQL", "export the report",
                          "see the runs"}  # fmt: skip
    assert [s for s in steps.values() if not _exists(s, tmp_path, tool)] == []
    assert "marimo edit" in steps["explore in a notebook"]
    assert steps["export the report"] == "esper-warehouse report --warehouse demo.duckdb"

    report = run(*shlex.split(steps["export the report"]), timeout=600)
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-3000:]
    assert (tmp_path / "report" / "index.html").is_file()
    module = run(str(Path(shlex.split(steps["query with SQL"])[0])), "-m",
                 "esper_warehouse.pipelines.cli", "--help", timeout=60)  # fmt: skip
    assert module.returncode == 0, module.stderr[-2000:]  # `python -m`: this folder first


def test_without_the_extra_report_names_what_is_missing_and_how_to_install_it(
    installed: Path, tmp_path: Path
):
    """The bare wheel: `report` stops at once (exit 2) naming marimo and README's command, not
    "cells failed in ..."; the demo's next steps give that command instead of marimo's."""
    duckdb.connect(str(tmp_path / "demo.duckdb")).close()
    done = subprocess.run(
        [str(installed / "esper-warehouse"), "report", "--warehouse", "demo.duckdb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_user_env(),
    )  # fmt: skip
    install = " ".join(readme_install_line()[:3])
    assert done.returncode == 2, done.stderr
    assert "marimo" in done.stderr and "cells failed" not in done.stderr
    assert f"{install} --force 'dist/esper_warehouse-" in done.stderr
    assert not (tmp_path / "report").exists()

    code = "from pathlib import Path; from esper_warehouse.pipelines.jobs.demo import next_steps; "
    code += "print(next_steps(Path('demo.duckdb')))"
    shown = subprocess.run(
        [str(installed / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=_user_env(),
    )  # fmt: skip
    steps = _steps(shown.stdout)
    assert "marimo" not in steps["explore in a notebook"].split()[0]
    assert f"{install} --force" in steps["explore in a notebook"]
    for label in ("query with SQL", "see the runs"):
        assert Path(shlex.split(steps[label])[0]).is_file(), steps[label]
    assert "report --warehouse" not in steps["export the report"]
