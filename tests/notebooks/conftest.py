"""Session fixtures: one freshly loaded demo warehouse, the report exported from it once, and the
notebooks exported against a warehouse that does not exist.

The warehouse and the report are built once per test run, whichever worker comes first
(`built_once`, tests/conftest.py), and only read afterwards."""

from __future__ import annotations

import contextlib
import io
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from esper_warehouse.pipelines.commands import report as report_command
from esper_warehouse.pipelines.views import report

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, built_once
from tests.notebooks.browser import Opened, open_offline

DEVICES = 300  # enough for every chart to have several platforms, groups and rollouts
NIGHTS = 3  # a full load and two nightly runs: a trend of three days


# The simulator's records kept beside the demo warehouse, one file per night: the tests that
# check the marts against numbers worked out independently read them
# (tests/notebooks/test_rollout_questions.py).
TRUTH_TABLES = ("devices", "device_apps", "tenant_apps", "tenant_app_versions")


def build_demo_warehouse(
    path: Path, devices: int = DEVICES, nights: int = NIGHTS, truth_dir: Path | None = None
) -> None:
    """What `esper-warehouse demo` does, smaller: the embedded simulator, one full load, then a
    night-by-night incremental load per simulated day, the models built by the last two runs only
    (as `pipelines/jobs/demo.py` does: every model is rebuilt whole from the raw tables, and the
    record of changes needs the night before the last to compare with). With `truth_dir`,
    the API's records of `TRUTH_TABLES` as each load read them go to `night-<n>.json` there."""
    import json

    from esper_warehouse.pipelines.jobs.demo import DEMO_DATA_TAP
    from esper_warehouse.pipelines.run.runner import RunSettings, run
    from esper_warehouse.simulator import Simulator

    with Simulator(devices=devices, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        options = {"base_url": sim.base_url, "api_key": API_KEY, "enterprise_id": ENTERPRISE_ID,
                   **DEMO_DATA_TAP}  # fmt: skip
        for night in range(nights):
            result = run(
                RunSettings(
                    warehouse=path,
                    full=night == 0,
                    lock_timeout_s=30,
                    build_models=night >= nights - 2,
                    source_options=options,
                )
            )
            assert result.exit_code == 0, f"night {night}: {result.status}: {result.error}"
            if truth_dir is not None:
                truth_dir.mkdir(parents=True, exist_ok=True)
                records = {table: sim.truth(table) for table in TRUTH_TABLES}
                (truth_dir / f"night-{night}.json").write_text(
                    json.dumps({"as_of": result.as_of.isoformat(), **records}, default=str)
                )
            sim.advance(hours=24)


@pytest.fixture(scope="module")
def common() -> ModuleType:
    """notebooks/_common.py, imported when a test asking for it runs: it imports marimo, altair
    and polars (~2 CPU-s), which every test worker would otherwise pay while collecting the
    suite."""
    sys.path.insert(0, str(report.NOTEBOOKS_DIR))
    import _common

    return _common


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo warehouse, read-only: a test that writes copies it first."""
    folder, _ = built_once(
        tmp_path_factory,
        "demo",
        lambda f: build_demo_warehouse(f / "demo.duckdb", truth_dir=f / "truth"),
    )
    return folder / "demo.duckdb"


@dataclass(frozen=True)
class ReportRun:
    out: Path
    charts: Path
    exit_code: int
    log: str
    seconds: float


def export_report(warehouse: Path, root: Path) -> ReportRun:
    """`esper-warehouse report --warehouse <warehouse> --out <root>/report --charts <root>/img`."""
    out, charts = root / "report", root / "img"
    log = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = report_command.main(
            ["--warehouse", str(warehouse), "--out", str(out), "--charts", str(charts)]
        )
    return ReportRun(out, charts, code, log.getvalue(), time.monotonic() - started)


@pytest.fixture(scope="session")
def report_run(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    """The report exported from the demo warehouse, once per test run; its pages are read-only."""
    _, run = built_once(tmp_path_factory, "report", lambda f: export_report(demo_warehouse, f))
    return run


class RenderedReport:
    """The report's offline pages as headless Chromium rendered them (network off), each opened
    once per test run (`built_once`: the workers share it), when a test first asks for it."""

    def __init__(self, run: ReportRun, factory: pytest.TempPathFactory) -> None:
        self.run = run
        self._factory = factory
        self._opened: dict[str, Opened] = {}

    def page(self, name: str) -> Opened:
        if name not in self._opened:
            page = self.run.out / f"{name}.html"
            _, self._opened[name] = built_once(
                self._factory, f"rendered-{name}", lambda _: open_offline(page)
            )
        return self._opened[name]


@pytest.fixture(scope="session")
def rendered(report_run: ReportRun, tmp_path_factory: pytest.TempPathFactory) -> RenderedReport:
    """The offline pages of `report_run`, rendered by Chromium."""
    return RenderedReport(report_run, tmp_path_factory)


@pytest.fixture(scope="session")
def missing_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every notebook exported against a warehouse path with no file behind it."""
    root = tmp_path_factory.mktemp("missing")
    missing = root / "nowhere" / "esper.duckdb"
    exports = report.export_all(missing, root / "report")
    yield {"path": missing, **{e.notebook.stem: e for e in exports}}
