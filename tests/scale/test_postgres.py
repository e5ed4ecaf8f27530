"""A central Postgres: raw tables loaded by dlt, models built in DuckDB, marts published back."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.views import publish

from tests.conftest import API_KEY, ENTERPRISE_ID, storage_version
from tests.scale.postgres import postgres_server

# Every mart the SQL build makes (one file each) is published.
ROOT = Path(__file__).resolve().parents[2]
MARTS = sorted(path.stem for path in (Path(__file__).parents[2] / "sql" / "marts").glob("*.sql"))

PASSWORD = "pw-never-printed-4242"  # the test server trusts local sockets, so any password works


@pytest.fixture(scope="module")
def pg_uri() -> Iterator[str]:
    with postgres_server() as uri:
        yield uri.replace("postgres:@", f"postgres:{PASSWORD}@")


def _rows(pg_uri: str, sql: str) -> list[tuple]:
    con = publish.connect(pg_uri)
    try:
        with con.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else []
        con.commit()
        return rows
    finally:
        con.close()


def _assert_published_marts_equal_duckdb(
    pg_uri: str, local: list[tuple], rollout: list[tuple]
) -> None:
    """Lists and structs are jsonb in Postgres, equal to DuckDB's values."""
    published = _rows(
        pg_uri,
        "select device_id, verdict, reasons from marts.fleet_compliance order by device_id",
    )
    assert [(d, v, r) for d, v, r in published] == [(d, v, r) for d, v, r in local]
    assert _rows(
        pg_uri,
        "select data_type from information_schema.columns where table_schema = 'marts' "
        "and table_name = 'command_rollout' and column_name = 'top_failure_reasons'",
    ) == [("jsonb",)]
    remote = _rows(
        pg_uri,
        "select command_request_id, target_devices, success_rate, top_failure_reasons "
        "from marts.command_rollout order by command_request_id",
    )
    assert len(remote) == len(rollout) > 0
    for mine, theirs in zip(rollout, remote, strict=True):
        assert mine[:3] == theirs[:3]
        assert json.loads(json.dumps(mine[3], default=str)) == theirs[3]


def _published_rows(out: str) -> list[str]:
    """The per-mart lines of a publish report."""
    return [line for line in out.splitlines() if line.startswith("  marts.")]


def test_raw_in_postgres_models_in_duckdb_marts_back_in_postgres_twice(
    sim: object,
    tmp_path: Path,
    pg_uri: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", pg_uri)
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)  # type: ignore[attr-defined]
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    state = tmp_path / "pg_state.duckdb"  # only names the dlt working directory
    compute = tmp_path / "compute.duckdb"

    assert cli.main(["run", "--destination", "postgres", "--warehouse", str(state)]) == 0
    devices = len(sim.truth("devices"))  # type: ignore[attr-defined]
    assert _rows(pg_uri, "select count(*) from esper.devices") == [(devices,)]
    assert not compute.exists()

    assert cli.main(["publish", "--pull", "--warehouse", str(compute)]) == 0
    first = capsys.readouterr()
    assert f"published {len(MARTS)} marts" in first.out
    assert storage_version(compute) == "v1.5.0+"  # a new warehouse, as a run writes one
    with duckdb.connect(str(compute), read_only=True) as con:
        assert con.sql("select count(*) from esper.devices").fetchone()[0] == devices
        # the pulled columns keep their types: timestamps and JSON, not text
        kinds = dict(con.sql("select column_name, data_type from information_schema.columns "
                             "where table_schema = 'esper' and table_name = 'devices'").fetchall())  # fmt: skip
        assert kinds["updated_at"] == "TIMESTAMP WITH TIME ZONE"
        local = con.sql(
            "select device_id, verdict, reasons from marts.fleet_compliance order by device_id"
        ).fetchall()
        rollout = con.sql(
            "select command_request_id, target_devices, success_rate, top_failure_reasons "
            "from marts.command_rollout order by command_request_id"
        ).fetchall()
    assert 0 < len(local) <= devices
    _assert_published_marts_equal_duckdb(pg_uri, local, rollout)

    # a second publish (no pull) gives the same tables and rows; a stale table is dropped
    _rows(pg_uri, "create table marts.retired_mart (x int)")
    counts = dict(_rows(pg_uri, "select 'fleet_compliance', count(*) from marts.fleet_compliance"))
    assert cli.main(["publish", "--warehouse", str(compute)]) == 0
    second = capsys.readouterr()
    tables = _rows(
        pg_uri,
        "select table_name from information_schema.tables where table_schema = 'marts' order by 1",
    )
    assert [t for (t,) in tables] == MARTS
    assert (
        dict(_rows(pg_uri, "select 'fleet_compliance', count(*) from marts.fleet_compliance"))
        == counts
    )

    assert _published_rows(first.out) == _published_rows(second.out)
    assert len(_published_rows(first.out)) == len(MARTS)
    for text in (first.out, first.err, second.out, second.err):
        assert PASSWORD not in text and API_KEY not in text


def test_unreachable_postgres_is_a_clear_error_without_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(
        "DESTINATION__POSTGRES__CREDENTIALS",
        f"postgresql://postgres:{PASSWORD}@localhost/postgres?host={tmp_path}/nowhere",
    )
    warehouse = tmp_path / "x.duckdb"
    duckdb.connect(str(warehouse)).close()  # a warehouse that opens: Postgres is what fails
    assert cli.main(["publish", "--warehouse", str(warehouse)]) == 2
    err = capsys.readouterr().err
    assert "cannot connect to Postgres" in err and PASSWORD not in err


def test_list_and_struct_columns_map_to_jsonb() -> None:
    assert publish.postgres_type("VARCHAR[]") == ("jsonb", True)
    assert publish.postgres_type("STRUCT(reason VARCHAR, devices BIGINT)[]") == ("jsonb", True)
    assert publish.postgres_type("DECIMAL(18,3)") == ("numeric(18,3)", False)
    assert publish.postgres_type("TIMESTAMP WITH TIME ZONE") == ("timestamptz", False)
    assert publish.postgres_type("DOUBLE") == ("double precision", False)


def test_the_guide_s_postgres_block_runs_as_pasted_with_pgserver(tmp_path: Path) -> None:
    """docs/guide/growing.md's Postgres block in bash, in a folder beside a checkout's `.venv` and a DuckDB
    warehouse called demo.duckdb (as after `make demo`): pgserver starts, the simulator serves
    (on a free port instead of 8765), raw tables land in Postgres, the marts are published from
    both files, and the server stops. `set -e`: any command that fails fails the test."""
    pytest.importorskip("pgserver")
    readme = (ROOT / "docs" / "guide" / "growing.md").read_text()
    block = readme.split("**Postgres.**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    build_models(tmp_path / "demo.duckdb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    done = subprocess.run(
        ["bash", "-e", "-c", block.replace("8765", str(port))],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    published = [line for line in done.stdout.splitlines() if line.startswith("published ")]
    assert [p.split(" marts")[0] for p in published] == [f"published {len(MARTS)}"] * 2
    assert "stopped the PostgreSQL" in done.stdout
