"""`publish` behind a reader: a lock timeout that names the reader, other marts stay readable."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views import publish

from tests.scale.postgres import postgres_server


@pytest.fixture(scope="module")
def pg_uri() -> Iterator[str]:
    with postgres_server() as uri:
        yield uri


def _marts(path: Path, rows: int) -> Path:
    """A DuckDB warehouse with two marts of `rows` rows each."""
    with duckdb.connect(str(path)) as con:
        con.execute("create schema if not exists marts")
        for mart in ("command_rollout", "fleet_compliance"):
            con.execute(
                f"create or replace table marts.{mart} as select range as id from range({rows})"
            )
    return path


def _count(con: object, mart: str) -> int:
    with con.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(f"select count(*) from marts.{mart}")
        return int(cur.fetchone()[0])


def test_publish_behind_an_idle_reader_times_out_naming_it_and_blocks_no_other_reader(
    pg_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", pg_uri)
    warehouse = _marts(tmp_path / "w.duckdb", 10)
    assert cli.main(["publish", "--warehouse", str(warehouse)]) == 0
    _marts(warehouse, 20)  # tonight's marts: twice the rows

    reader = publish.connect(pg_uri)  # a BI session idle in a transaction after one read
    with reader.cursor() as cur:
        cur.execute("set application_name = 'bi-dashboard'")
    reader.commit()
    assert _count(reader, "fleet_compliance") == 10
    with reader.cursor() as cur:
        cur.execute("select pg_backend_pid()")
        reader_pid = cur.fetchone()[0]

    codes: list[int] = []
    publishing = threading.Thread(
        target=lambda: codes.append(
            cli.main(["publish", "--warehouse", str(warehouse), "--lock-timeout", "4"])
        )
    )
    other = publish.connect(pg_uri)
    try:
        with other.cursor() as cur:
            cur.execute("set lock_timeout = '2s'")  # a blocked read fails instead of hanging
        other.commit()
        publishing.start()
        reads = []
        while publishing.is_alive() and len(reads) < 10:
            reads.append(_count(other, "command_rollout"))  # another mart, while publish waits
            other.rollback()
            time.sleep(0.2)
        assert reads and set(reads) == {10}
        publishing.join(timeout=60)
        assert not publishing.is_alive(), "publish still waits behind the reader"
    finally:
        reader.rollback()
        reader.close()
        other.close()
        publishing.join(timeout=60)

    err = capsys.readouterr().err
    assert codes == [Exit.LOCKED]
    assert "marts.fleet_compliance" in err and f"pid {reader_pid}" in err
    assert "bi-dashboard" in err and "idle in transaction" in err
    check = publish.connect(pg_uri)
    try:  # the old marts, whole
        assert _count(check, "fleet_compliance") == 10 and _count(check, "command_rollout") == 10
    finally:
        check.close()
    assert cli.main(["publish", "--warehouse", str(warehouse)]) == 0  # once the reader is gone


def test_postgres_lost_mid_transaction_exits_2_as_at_connect(
    pg_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", pg_uri)
    warehouse = _marts(tmp_path / "w.duckdb", 10)
    assert cli.main(["publish", "--warehouse", str(warehouse)]) == 0
    reader = publish.connect(pg_uri)  # holds a mart: publish stays in its transaction
    assert _count(reader, "fleet_compliance") == 10
    with reader.cursor() as cur:
        cur.execute("select pg_backend_pid()")
        reader_pid = cur.fetchone()[0]
    codes: list[int] = []
    publishing = threading.Thread(
        target=lambda: codes.append(
            cli.main(["publish", "--warehouse", str(warehouse), "--lock-timeout", "60"])
        )
    )
    admin = publish.connect(pg_uri)
    try:
        publishing.start()
        terminated = False
        deadline = time.monotonic() + 30
        while not terminated and time.monotonic() < deadline:  # the server ends its session
            time.sleep(0.3)
            with admin.cursor() as cur:
                cur.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity "
                    "where application_name = %s and xact_start is not null "
                    "and pid not in (pg_backend_pid(), %s)",
                    [publish.APPLICATION_NAME, reader_pid],
                )
                terminated = any(row[0] for row in cur.fetchall())
            admin.commit()
        assert terminated
        publishing.join(timeout=60)
    finally:
        reader.rollback()
        reader.close()
        admin.close()
        publishing.join(timeout=60)
    err = capsys.readouterr().err
    assert codes == [2], err
    assert "lost the connection to Postgres" in err and "nothing was published" in err
