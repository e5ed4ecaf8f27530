"""The package a user installs with pipx or ``uv tool install`` works away from the checkout.

The wheel is built, installed with the locked dependencies into a fresh virtual environment and
run from an empty folder holding a dlt project's own ``sources/`` and ``pipelines/`` packages,
which must not shadow the tool's.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).parent / "uv")  # a dev dependency (pyproject.toml)


def _uv(*args: str, cwd: Path) -> None:
    subprocess.run([UV, *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the built wheel and the locked runtime dependencies; its bin folder."""
    work = tmp_path_factory.mktemp("wheel")
    _uv("build", "--wheel", "--quiet", "--out-dir", str(work / "dist"), cwd=ROOT)
    requirements = work / "requirements.txt"
    _uv("export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--quiet",
        "--output-file", str(requirements), cwd=ROOT)  # fmt: skip
    _uv("venv", "--quiet", "--python", sys.executable, str(work / "venv"), cwd=work)
    wheel = next((work / "dist").glob("esper_warehouse-*.whl"))
    python = work / "venv" / "bin" / "python"
    _uv("pip", "install", "--quiet", "--python", str(python), "-r", str(requirements),
        str(wheel), cwd=work)  # fmt: skip
    return python.parent


def test_the_wheel_claims_one_import_name_and_ships_what_the_code_reads(installed: Path):
    wheel = next((installed.parent.parent / "dist").glob("*.whl"))
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


def test_the_installed_demo_runs_from_an_empty_folder_beside_a_users_dlt_project(
    installed: Path, tmp_path: Path
):
    for shadow in ("sources", "pipelines", "simulator"):  # a dlt project's own packages
        (tmp_path / shadow).mkdir()
        (tmp_path / shadow / "__init__.py").write_text(
            f"raise ImportError('the user\\'s {shadow}')"
        )
    done = subprocess.run(
        [str(installed / "esper-warehouse"), "demo", "--devices", "100", "--days", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Compliance (marts.headlines), of the" in done.stdout
    with duckdb.connect(str(tmp_path / "demo.duckdb"), read_only=True) as con:
        devices = con.sql("select count(*) from marts.fleet_compliance").fetchone()[0]
    assert devices >= 100
    module = subprocess.run(
        [str(installed / "python"), "-m", "esper_warehouse.pipelines.cli", "--help"],
        cwd=tmp_path,  # `python -m` puts this folder first on the path
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert module.returncode == 0, module.stderr[-2000:]
