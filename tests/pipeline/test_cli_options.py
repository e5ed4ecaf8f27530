"""One set of command-line options, one default warehouse, exit codes that tell the truth.

Every command runs as a subprocess in a folder of its own, as an admin types it there; only the
`--help` texts are read in this process (argparse writes them before any setting is read).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.build.models import SEEDS_ENV, SQL_DIR

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import hold_file

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = "esper_warehouse.duckdb"


def esper_warehouse(cwd: Path, *args: str, env: dict[str, str] | None = None):
    """`esper-warehouse <args>` run in `cwd`, with no seeds folder or warehouse in the env."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ESPER_WAREHOUSE")}
    environment["PYTHONPATH"] = str(ROOT)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "esper_warehouse.pipelines.cli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    work = tmp_path / "admin"
    work.mkdir()
    return work


@pytest.fixture(scope="module")
def created(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`esper-warehouse models --create` run once in an empty folder: an empty warehouse with
    every model, at the default path."""
    work = tmp_path_factory.mktemp("created")
    done = esper_warehouse(work, "models", "--create")
    assert done.returncode == 0, done.stderr
    return work / DEFAULT


@pytest.fixture
def built(folder: Path, created: Path) -> Path:
    """The warehouse `models --create` built (`created`), copied into the test's folder."""
    assert not created.with_name(created.name + ".wal").exists()  # the file is complete alone
    shutil.copyfile(created, folder / DEFAULT)
    return folder / DEFAULT


@pytest.fixture
def holder(built: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the warehouse open for writing (a run, the DuckDB CLI)."""
    process = hold_file(built)
    yield process
    process.kill()
    process.wait()


def test_models_with_no_flag_builds_esper_warehouse_duckdb(created: Path, built: Path) -> None:
    assert created.exists()
    # never ./esper.duckdb
    assert sorted(p.name for p in created.parent.glob("*.duckdb")) == [DEFAULT]
    done = esper_warehouse(built.parent, "models")  # a rebuild of the same file
    assert done.returncode == 0, done.stderr
    assert f"into {DEFAULT}" in done.stdout
    assert "marts)" in done.stdout  # the summary: relations per layer


def test_status_and_report_with_no_flag_read_esper_warehouse_duckdb(folder: Path) -> None:
    (folder / "demo.duckdb").write_bytes(b"")  # the old report fallback must not be chosen
    for command in ("status", "report", "models"):
        done = esper_warehouse(folder, command)
        assert done.returncode == 2, (command, done.stderr)
        assert f"no warehouse file {folder / DEFAULT}" in done.stderr, command
    assert not (folder / DEFAULT).exists()  # models created nothing


def test_status_with_no_flag_reports_on_esper_warehouse_duckdb(built: Path) -> None:
    """The file `models` built holds no run: `status` names it and the command to run, exit 2
    (issue 42: an empty warehouse is never shown as if it were one)."""
    done = esper_warehouse(built.parent, "status")
    assert done.returncode == 2, done.stderr
    assert f"no run has loaded {DEFAULT} yet: run `esper-warehouse run" in done.stderr


def test_run_with_no_flag_loads_esper_warehouse_duckdb(sim, folder: Path) -> None:
    env = {
        "SOURCES__ESPER__BASE_URL": sim.base_url,
        "SOURCES__ESPER__API_KEY": API_KEY,
        "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
    }
    done = esper_warehouse(folder, "run", "--resources", "groups", "--no-models", env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.glob("*.duckdb")) == [DEFAULT]


# What `esper-warehouse <command> --help` has imported when it is done, one line per command.
IMPORTED = """
import contextlib, sys
from esper_warehouse.pipelines import cli
with contextlib.redirect_stdout(None), contextlib.suppress(SystemExit):
    cli.main([sys.argv[1], "--help"])
print(sorted(m for m in ("dlt", "pyarrow", "httpx", "uvicorn") if m in sys.modules))
"""


@pytest.mark.parametrize("command", ["status", "report"])
def test_the_morning_commands_start_without_dlt(command: str) -> None:
    """Only the module of the subcommand asked for is imported (commands.SUBCOMMANDS): `status` and
    `report` start in ~0.2 s, not the ~1.3 s of dlt, Arrow and the source that `run` needs."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED, command], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["run", "status", "models", "report", "publish", "demo"])
def test_every_subcommand_takes_the_shared_options(
    folder: Path, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(folder)
    for name in [n for n in os.environ if n.startswith("ESPER_WAREHOUSE")]:
        monkeypatch.delenv(name)
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in ("-v, --verbose", "--project-dir DIR", "--warehouse WAREHOUSE"):
        assert option in text, (command, option)
    default = "demo.duckdb" if command == "demo" else DEFAULT
    assert f"(default: {default})" in text


def test_models_on_a_missing_file_exits_2_and_creates_nothing(folder: Path) -> None:
    done = esper_warehouse(folder, "models", "--warehouse", "missing.duckdb")
    assert done.returncode == 2
    assert "missing.duckdb" in done.stderr and "--create" in done.stderr
    assert list(folder.iterdir()) == []


def test_models_and_status_on_a_locked_file_exit_5_with_one_message(built: Path, holder) -> None:
    models = esper_warehouse(built.parent, "models")
    status = esper_warehouse(built.parent, "status")
    report = esper_warehouse(built.parent, "report")
    message = f"{DEFAULT} is held by another process"
    for done in (models, status, report):
        assert done.returncode == 5, done.stderr
        assert message in done.stderr
        assert "Conflicting lock" not in done.stderr  # DuckDB's own text stays out
    assert models.stderr.strip() == status.stderr.strip()


def _project(root: Path) -> Path:
    """A project folder whose .dlt/config.toml points seeds_dir at targets with a duplicate row."""
    targets = root / "targets"
    shutil.copytree(SQL_DIR / "seeds", targets)
    csv = targets / "compliance_platform_targets.csv"
    android = next(line for line in csv.read_text().splitlines() if line.startswith("ANDROID"))
    csv.write_text(csv.read_text() + android + "\n")
    (root / ".dlt").mkdir()
    (root / ".dlt" / "config.toml").write_text('[esper_warehouse]\nseeds_dir = "targets"\n')
    return root


def test_seeds_dir_from_dlt_config_is_honoured(built: Path, tmp_path: Path) -> None:
    """The duplicate row in the configured targets fails the build: the config was read."""
    project = _project(built.parent)
    here = esper_warehouse(project, "models")
    elsewhere = esper_warehouse(
        tmp_path, "models", "--project-dir", str(project), "--warehouse", str(built)
    )
    for done in (here, elsewhere):
        assert done.returncode == 1, done.stderr
        assert (
            "seed compliance_platform_targets.csv has 2 rows for platform ANDROID; "
            "each platform must appear once" in done.stderr
        )
    # the environment variable still wins over the config file
    fine = esper_warehouse(project, "models", env={SEEDS_ENV: str(SQL_DIR / "seeds")})
    assert fine.returncode == 0, fine.stderr


def test_a_seeds_dir_that_does_not_exist_exits_2(built: Path) -> None:
    done = esper_warehouse(built.parent, "models", env={SEEDS_ENV: "no-such-folder"})
    assert done.returncode == 2
    assert "no-such-folder" in done.stderr and "seeds_dir" in done.stderr
