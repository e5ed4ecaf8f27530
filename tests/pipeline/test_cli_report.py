"""`esper-warehouse report` tells the truth about a warehouse held by another process."""

from __future__ import annotations

from pathlib import Path

import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.commands import report as report_command
from esper_warehouse.pipelines.views import report

from .helpers import hold_file


@pytest.fixture
def built(tmp_path: Path) -> Path:
    path = tmp_path / "esper_warehouse.duckdb"
    build_models(path)
    return path


def test_report_on_a_locked_warehouse_exits_5_before_exporting(built, tmp_path, holders, capsys):
    holders.append(hold_file(built))
    out = tmp_path / "report"
    assert report_command.main(["--warehouse", str(built), "--out", str(out)]) == 5
    assert f"{built} is held by another process" in capsys.readouterr().err
    assert not out.exists()  # no page claims to show the fleet


@pytest.mark.slow  # the notebook waits 20 s for the lock before it shows "busy"
def test_a_page_that_says_the_warehouse_is_busy_makes_report_exit_5(
    built, tmp_path, holders, capsys, monkeypatch
):
    """The lock is taken after report's own check, while the notebook runs (a load starting)."""
    checked = report.unreadable

    def check_then_lock(path: Path) -> tuple[int, str] | None:
        found = checked(path)
        holders.append(hold_file(path))
        return found

    monkeypatch.setattr(report, "unreadable", check_then_lock)
    monkeypatch.setattr(report, "notebooks", lambda: [report.NOTEBOOKS_DIR / "data_tap.py"])
    out = tmp_path / "report"
    assert report_command.main(["--warehouse", str(built), "--out", str(out)]) == 5
    err = capsys.readouterr().err
    assert f"{built} is held by another process" in err and "data_tap.py" in err
    assert report.BUSY_PAGE in (out / "data_tap.html").read_text(encoding="utf-8")
    assert "(the warehouse was busy)" in (out / "index.html").read_text(encoding="utf-8")
