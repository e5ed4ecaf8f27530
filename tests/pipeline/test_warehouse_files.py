"""Every command says the same, and exits as docs/reference/exit-codes.md says, of a warehouse file that is damaged,
not a DuckDB file, held by a writer, on a full disk or in a folder that cannot be written."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines import cli, warehouse
from esper_warehouse.pipelines.build import models
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.commands import models as models_command
from esper_warehouse.pipelines.commands import publish as publish_command
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views import report

from tests.conftest import storage_version

from .helpers import hold_file, load

DAMAGED = "is not a DuckDB warehouse or is damaged"
HELD = "is held by another process"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "esper_warehouse.duckdb"
    build_models(path)
    return path


def _truncated(good: bytes) -> bytes:
    """A copy cut short, within the blocks in use: the pristine (empty) warehouse keeps its
    catalog in the file's first quarter, and a cut among the free blocks after it damages
    nothing that any read would notice."""
    return good[: len(good) // 10]


def _checksum_corrupt(good: bytes) -> bytes:
    """Bytes flipped inside the first data block (at 12,288): its stored checksum no longer
    matches, DuckDB says "Corrupt database file ... in block at location 12288"."""
    data = bytearray(good)
    for offset in range(12288 + 100, 12288 + 200):
        data[offset] ^= 0xFF
    return bytes(data)


SPOILED: dict[str, Callable[[bytes], bytes]] = {
    "truncated": _truncated,
    "empty": lambda good: b"",
    "not-duckdb": lambda good: b"device,os\nphone,14\n" * 200,
    "checksum": _checksum_corrupt,
}


@pytest.fixture(params=list(SPOILED))
def spoiled(request: pytest.FixtureRequest, pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "esper_warehouse.duckdb"
    path.write_bytes(SPOILED[request.param](pristine.read_bytes()))
    return path


@pytest.mark.parametrize("command", ["status", "models", "report", "publish"])
def test_a_damaged_or_foreign_file_is_exit_2_called_damaged_by_every_command(
    spoiled: Path, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    extra = ["--out", str(out)] if command == "report" else []
    code = cli.main([command, "--warehouse", str(spoiled), *extra])
    err = capsys.readouterr().err
    assert code == Exit.CONFIG, err
    assert f"{spoiled} {DAMAGED}" in err, err
    assert HELD not in err and "Traceback" not in err
    assert not out.exists()  # no page claims to show a fleet


def test_a_notebook_on_a_damaged_file_says_so_at_once_and_fails_the_page(
    pristine: Path, tmp_path: Path
) -> None:
    """The notebooks' own test of a lock: "block at location" is no lock to wait 20 s for."""
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(_checksum_corrupt(pristine.read_bytes()))
    export = report.export_notebook(report.NOTEBOOKS_DIR / "data_tap.py", tmp_path, corrupt)
    page = export.html.read_text(encoding="utf-8")
    assert not export.ok and not export.busy
    assert report.UNREADABLE_PAGE in page and report.BUSY_PAGE not in page
    assert export.seconds < report_wait(), export.seconds


def report_wait() -> float:
    import sys

    sys.path.insert(0, str(report.NOTEBOOKS_DIR))
    import _common

    return _common.LOCK_WAIT_SECONDS


def test_publish_behind_a_duckdb_writer_is_exit_5_with_the_shared_message(
    pristine: Path, tmp_path: Path, holders: list, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "esper_warehouse.duckdb"
    shutil.copy(pristine, held)
    holders.append(hold_file(held))
    assert publish_command.main(["--warehouse", str(held)]) == Exit.LOCKED
    err = capsys.readouterr().err
    assert f"{held} {HELD}" in err and "nothing was published" in err
    assert "Could not set lock" not in err and "Conflicting lock" not in err


class _DiskFullAtCommit:
    """A DuckDB connection whose commit fails as DuckDB's does when the disk is full: the
    transaction is over (rolled back) and the error quotes the operating system."""

    def __init__(self, con: duckdb.DuckDBPyConnection, wal: str) -> None:
        self._con, self._wal = con, wal

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.strip().lower() == "commit":
            self._con.execute("rollback")
            raise duckdb.TransactionException(
                "TransactionContext Error: Failed to commit: Could not write file "
                f'"{self._wal}": No space left on device'
            )
        return self._con.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def test_a_full_disk_during_the_models_says_the_disk_is_full(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Measured on a real 28 MB tmpfs holding a 28 MB warehouse, DuckDB's commit fails with the
    text served here, and the build's rollback then said "cannot rollback - no transaction is
    active" instead; the same sequence is injected at the connection."""
    path = tmp_path / "esper_warehouse.duckdb"
    shutil.copy(pristine, path)
    real_connect = duckdb.connect
    monkeypatch.setattr(
        models.duckdb,
        "connect",
        lambda target, *a, **k: (
            _DiskFullAtCommit(real_connect(target, *a, **k), f"{path}.wal")
            if not k.get("read_only")
            else real_connect(target, *a, **k)
        ),
    )
    code = models_command.main(["--warehouse", str(path)])
    err = capsys.readouterr().err
    assert code == Exit.FAILED, err
    assert f"the disk holding {tmp_path} is full" in err and "No space left on device" in err
    assert "cannot rollback" not in err


def test_a_read_only_folder_ends_the_run_with_its_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tests run as root here, for whom no folder is read-only: the operating system's refusal is
    injected where the run first writes (its lock file beside the warehouse)."""

    def refused(path: Any, *args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    (tmp_path / "ro").mkdir()  # a folder that is there, and refuses what is written in it
    monkeypatch.setattr(warehouse, "run_lock_path", lambda wh: tmp_path / "ro" / "x.lock")
    monkeypatch.setattr(Path, "mkdir", refused)
    code = cli.main(["run", "--warehouse", str(tmp_path / "ro" / "esper_warehouse.duckdb")])
    captured = capsys.readouterr()
    assert code == Exit.CONFIG, captured.err
    assert f"{tmp_path / 'ro'} cannot be written (" in captured.out + captured.err
    assert "Read-only file system" in captured.out + captured.err
    assert captured.out.startswith("run not started (failed)"), captured.out  # its summary line
    assert "Traceback" not in captured.err


def test_models_into_a_read_only_folder_is_exit_2_naming_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ro" / "new.duckdb"

    def refused(path: str, *args: Any, **kwargs: Any) -> Any:  # DuckDB's words, as measured
        raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file system')

    monkeypatch.setattr(models.duckdb, "connect", refused)
    assert models_command.main(["--create", "--warehouse", str(target)]) == Exit.CONFIG
    err = capsys.readouterr().err
    assert f"{target.parent} cannot be written" in err and "cannot open it" not in err


def test_a_run_on_a_damaged_file_is_exit_2_before_any_request(sim, spoiled: Path) -> None:
    result = load(sim, spoiled)
    assert result.exit_code == Exit.CONFIG, result.error
    assert f"{spoiled} {DAMAGED}" in (result.error or "")
    assert sim.stats()["total"] == 0


def _neighbour(kind: str, pristine: Path, tmp_path: Path, holders: list) -> Path:
    """A --warehouse path that is not a usable file: missing, a folder, in a missing folder, or
    held by a DuckDB writer."""
    path = tmp_path / "esper_warehouse.duckdb"
    if kind == "folder":
        path.mkdir()
    elif kind == "no-folder":
        path = tmp_path / "gone" / "esper_warehouse.duckdb"
    elif kind == "held":
        shutil.copy(pristine, path)
        holders.append(hold_file(path))
    return path


NEIGHBOURS = {
    "missing": (Exit.CONFIG, "there is no warehouse file {resolved}"),
    "no-folder": (Exit.CONFIG, "the folder {path.parent} does not exist"),
    "folder": (Exit.CONFIG, "{path} is a folder, not a warehouse file"),
    "held": (Exit.LOCKED, "{path} " + HELD),
}


@pytest.mark.parametrize("kind", list(NEIGHBOURS))
@pytest.mark.parametrize("command", ["status", "models", "report", "publish"])
def test_a_warehouse_path_that_is_no_usable_file_is_said_alike_by_every_command(
    command: str,
    kind: str,
    pristine: Path,
    tmp_path: Path,
    holders: list,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`publish` as the others: a clear message and exit 2 (5 when held), never DuckDB's raw
    `IO Error` with exit 1; nothing is written beside it."""
    path = _neighbour(kind, pristine, tmp_path, holders)
    out = tmp_path / "report"
    extra = ["--out", str(out)] if command == "report" else []
    code = cli.main([command, "--warehouse", str(path), *extra])
    err = capsys.readouterr().err
    expected_code, says = NEIGHBOURS[kind]
    assert code == expected_code, err
    assert says.format(path=path, resolved=path.resolve()) in err, err
    assert "IO Error" not in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["folder", "no-folder"])
def test_publish_pull_into_no_usable_path_is_exit_2_before_postgres(
    kind: str, pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--pull` builds a compute file at --warehouse: a path where none can be is said before
    Postgres is asked (the credentials here point at a port nothing listens on)."""
    path = _neighbour(kind, pristine, tmp_path, [])
    env = {"DESTINATION__POSTGRES__CREDENTIALS": "postgresql://u:p@127.0.0.1:9/none"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        code = cli.main(["publish", "--pull", "--warehouse", str(path)])
    err = capsys.readouterr().err
    assert code == Exit.CONFIG, err
    assert "Postgres" not in err and "IO Error" not in err
    assert (
        "is a folder" if kind == "folder" else f"the folder {path.parent} does not exist"
    ) in err


@pytest.mark.parametrize("command", ["status", "models", "report", "publish"])
def test_a_bare_command_beside_the_demo_names_the_demo_warehouse_and_does_not_read_it(
    command: str,
    pristine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """After `make demo` only demo.duckdb is there: a bare command says so and how to read it,
    and still exits 2 (the demo is never read as if it were the real warehouse)."""
    shutil.copy(pristine, tmp_path / "demo.duckdb")
    monkeypatch.chdir(tmp_path)
    code = cli.main([command])
    err = capsys.readouterr().err
    assert code == Exit.CONFIG, err
    assert f"there is no warehouse file {tmp_path / 'esper_warehouse.duckdb'}" in err
    assert "the demo's warehouse demo.duckdb is here: read it with --warehouse demo.duckdb" in err


def test_a_new_warehouse_is_written_in_duckdb_1_5_storage_and_an_old_one_keeps_its_own(
    sim, shared_first_load, tmp_path: Path
) -> None:
    """The first load and `models --create` write a new file in DuckDB 1.5's storage format
    (`warehouse.STORAGE_VERSION`); a warehouse written before, in DuckDB's default format, is
    loaded and modelled in its own format, not rewritten."""
    assert storage_version(shared_first_load.warehouse) == "v1.5.0+"
    created = tmp_path / "created" / "esper_warehouse.duckdb"
    created.parent.mkdir()
    assert models_command.main(["--warehouse", str(created), "--create"]) == Exit.OK
    assert storage_version(created) == "v1.5.0+"

    old = tmp_path / "old" / "esper_warehouse.duckdb"
    old.parent.mkdir()
    duckdb.connect(str(old)).close()  # DuckDB's default format, as an earlier release wrote it
    before = storage_version(old)
    assert before != "v1.5.0+"
    result = load(sim, old)
    assert result.exit_code == Exit.OK, result.error
    build_models(old)
    assert storage_version(old) == before
    with duckdb.connect(str(old), read_only=True) as con:
        assert con.execute("select count(*) from marts.fleet_compliance").fetchone()[0] > 0
