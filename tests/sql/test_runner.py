"""The runner (pipelines/build/models.py) and the staging rules every model relies on."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build import raw_contract
from esper_warehouse.pipelines.build.models import SQL_DIR, ModelError, build_models
from esper_warehouse.pipelines.commands.models import main

from tests.sql import scenarios
from tests.sql.conftest import query_fn, querying
from tests.sql.rawdata import create_raw_tables, insert_rows, make_warehouse, raw_columns

MODELS = sorted(
    f"{layer}.{path.stem}"
    for layer in ("staging", "intermediate", "marts")
    for path in (SQL_DIR / layer).glob("*.sql")
)


def relations(path: Path) -> dict[str, str]:
    rows = query_fn(path)(
        "select table_schema || '.' || table_name as name, table_type from information_schema.tables "
        "where table_schema in ('seeds', 'staging', 'intermediate', 'marts')"
    )
    return {row["name"]: row["table_type"] for row in rows}


@pytest.fixture(scope="module")
def empty_built(tmp_path_factory) -> tuple[Path, list[str]]:
    """A warehouse file that did not exist, the models built on it once for the tests that only
    read it, and what the build returned. A test that builds again works on a copy."""
    warehouse = tmp_path_factory.mktemp("empty") / "esper.duckdb"
    return warehouse, build_models(warehouse)


def test_every_model_builds_on_an_empty_warehouse(empty_built):
    warehouse, built = empty_built
    assert sorted(b for b in built if not b.startswith("seeds.")) == MODELS
    with querying(warehouse) as every:
        for name in MODELS:
            every(f"select * from {name}")  # binds and runs
    q = query_fn(warehouse)
    assert q("select count(*) as n from marts.fleet_compliance") == [{"n": 0}]
    assert q("select count(*) as n from marts.fleet_compliance_daily") == [{"n": 0}]
    # no successful run yet: "now" is the real clock
    assert q("select as_of > timestamptz '2025-01-01' as ok from intermediate.int_as_of") == [
        {"ok": True}
    ]

    # a stand-in for every contract table, none in the raw dataset (dlt's)
    def tables(schema: str) -> set[str]:
        return {
            r["t"]
            for r in q(
                "select table_name as t from information_schema.tables where table_schema = ?",
                [schema],
            )
        }

    assert tables(raw_contract.PLACEHOLDERS) == set(raw_columns())
    assert tables("esper") == set()


@pytest.mark.parametrize("wh", ["compliance_wh", "rollout_wh", "commands_wh"])
def test_every_model_queries_on_a_loaded_warehouse(wh, request):
    path = request.getfixturevalue(wh)
    with querying(path) as every:
        for name in MODELS:
            every(f"select * from {name}")
    q = query_fn(path)
    assert (
        q("select as_of from intermediate.int_as_of")[0]["as_of"]
        .isoformat()
        .startswith("2026-10-31T12:00")
    )


def test_placeholders_only_for_missing_raw_tables(tmp_path):
    path = tmp_path / "partial.duckdb"
    con = duckdb.connect(str(path))
    create_raw_tables(con, ["devices", "_esper_runs"])
    con.execute("alter table esper.devices add column extra_api_field varchar")
    insert_rows(con, "devices", [scenarios.android("a-1")])
    insert_rows(con, "_esper_runs", scenarios.runs("2026-10-01T06:00:00+00:00"))
    con.close()
    build_models(path)
    q = query_fn(path)
    cols = {
        r["c"]
        for r in q(
            "select column_name as c from information_schema.columns "
            "where table_schema = 'esper' and table_name = 'devices'"
        )
    }
    assert "extra_api_field" in cols  # the loaded table was left alone
    assert q("select device_id, verdict, reasons from marts.fleet_compliance") == [
        {
            "device_id": "a-1",
            "verdict": "unverified",
            "reasons": ["never seen", "app inventory not reported"],
        }
    ]


def test_idempotent_rebuild(tmp_path, compliance_wh, empty_built):
    """The compliance scenario built once (`compliance_wh`, with the same targets), built again."""
    path = tmp_path / "esper.duckdb"
    shutil.copyfile(compliance_wh, path)
    before = query_fn(path)("select * from marts.fleet_compliance order by device_id")
    assert len(before) > 5
    second = build_models(path)
    assert second == empty_built[1]  # the same relations, in the same order
    assert query_fn(path)("select * from marts.fleet_compliance order by device_id") == before


def test_views_by_default_tables_when_marked(empty_built):
    kinds = relations(empty_built[0])
    assert kinds["staging.stg_esper__devices"] == "VIEW"
    assert kinds["marts.command_rollout"] == "VIEW"
    assert kinds["intermediate.int_device_ranges"] == "BASE TABLE"
    assert kinds["seeds.compliance_required_apps"] == "BASE TABLE"


@pytest.fixture
def broken_sql(tmp_path) -> Path:
    sql_dir = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql_dir)
    (sql_dir / "marts" / "zz_broken.sql").write_text(
        "select device_id, no_such_column from marts.fleet_compliance\n"
    )
    return sql_dir


def test_broken_model_fails_naming_the_file_and_leaves_warehouse_unchanged(
    tmp_path, broken_sql, empty_built, capsys
):
    path = tmp_path / "esper.duckdb"
    shutil.copyfile(empty_built[0], path)  # a good build first
    with pytest.raises(ModelError) as raised:
        build_models(path, sql_dir=broken_sql)
    message = str(raised.value)
    assert "zz_broken.sql" in message
    assert "no_such_column" in message  # DuckDB's own message
    # the transaction rolled back: the earlier build is intact, the broken model absent
    assert "marts.fleet_compliance" in relations(path)
    assert "marts.zz_broken" not in relations(path)


def test_main_exit_codes(tmp_path, capsys, monkeypatch, broken_sql):
    path = tmp_path / "esper.duckdb"
    assert main(["--warehouse", str(path)]) == 2  # no such file: nothing created
    assert not path.exists()
    assert f"no warehouse file {path}" in capsys.readouterr().err
    assert main(["--warehouse", str(path), "--create"]) == 0
    out = capsys.readouterr().out
    built = relations(path)
    # a summary: relations per layer, no list of names unless asked (-v)
    assert "marts.fleet_compliance" not in out and len(out.splitlines()) == 1, out
    marts = sum(name.startswith("marts.") for name in built)
    assert re.match(rf"built {len(built)} relations \(.*\b{marts} marts\) in [\d.]+ s ", out)
    assert main(["--warehouse", str(path), "-v"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert set(built) <= set(listed)
    monkeypatch.setattr("esper_warehouse.pipelines.build.models.SQL_DIR", broken_sql)
    assert main(["--warehouse", str(path)]) == 1
    err = capsys.readouterr().err
    assert "zz_broken.sql" in err and "no_such_column" in err


def test_build_order_follows_references(empty_built):
    position = {name: i for i, name in enumerate(empty_built[1])}
    assert position["intermediate.int_device_days"] > position["intermediate.int_device_spans"]
    assert position["intermediate.int_device_spans"] > position["intermediate.int_devices_current"]
    assert position["marts.stale_devices"] > position["marts.fleet_compliance"]


def test_version_key_compares_part_by_part(empty_built):
    q = query_fn(empty_built[0])
    row = q(
        "select version_key('13') = version_key('13.0') as a, "
        "version_key('13.0') = version_key('13.0.0') as b, "
        "version_key('13.0.1') > version_key('13') as c, "
        "version_key('14.10') > version_key('14.9') as d, "
        "version_key('Android 14') = version_key('14') as e, "
        "version_key('') is null as f"
    )
    assert row == [{k: True for k in "abcdef"}]


def test_staging_tidies_states_ids_and_text(tmp_path):
    data = scenarios.commands()
    data["command_statuses"].append(
        {
            "id": "s9",
            "request": "req-open",
            "device": "https://t-api.esper.cloud/api/enterprise/e-1/device/d9/",
            "state": "Command Cancelled",
            "reason": "  ",
        }
    )
    data["device_events"] = [
        {
            "id": 1,
            "device": "https://t-api.esper.cloud/api/enterprise/e-1/device/d7/",
            "enterprise": "https://t-api.esper.cloud/api/enterprise/e-1/",
            "message": "",
            "created_on": "2026-10-30T10:00:00Z",
        }
    ]
    path = make_warehouse(tmp_path / "w.duckdb", data)
    build_models(path)
    q = query_fn(path)
    states = q(
        "select state_raw, state, is_terminal from staging.stg_esper__command_statuses "
        "order by command_status_id"
    )
    assert [(r["state"], r["is_terminal"]) for r in states] == [
        ("success", True),
        ("success", True),
        ("failure", True),
        ("timeout", True),
        ("queued", False),
        ("in_progress", False),
        ("queued", False),
        ("cancelled", True),
    ]
    s9 = q(
        "select device_id, reason from staging.stg_esper__command_statuses "
        "where command_status_id = 's9'"
    )
    assert s9 == [{"device_id": "d9", "reason": None}]
    event = q("select device_id, enterprise_id, message from staging.stg_esper__device_events")
    assert event == [{"device_id": "d7", "enterprise_id": "e-1", "message": None}]
    ops = q("select state_raw, state from staging.stg_esper__operation_devices order by 1")
    assert {(r["state_raw"], r["state"]) for r in ops} == {
        ("CREATED", "queued"),
        ("FAILED", "failure"),
        ("SUCCEDED", "success"),
    }


def test_staging_renames_device_fields(compliance_wh):
    row = query_fn(compliance_wh)(
        "select device_id, security_patch_level, last_seen_at, os_version_key "
        "from staging.stg_esper__devices where device_id = 'a-patch-old'"
    )[0]
    assert str(row["security_patch_level"]) == "2026-06-01"
    assert row["os_version_key"] == [14, 0, 0, 0, 0, 0]
    group = query_fn(compliance_wh)(
        "select parent_group_id from staging.stg_esper__groups where group_id = 'g-tz'"
    )
    assert group == [{"parent_group_id": "g-stores"}]


# The DuckDB type dlt creates for each data type the declarations use (dlt's DuckDB type mapper).
DLT_DUCKDB_TYPES = {
    "text": "VARCHAR",
    "bigint": "BIGINT",
    "double": "DOUBLE",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
    "json": "JSON",
}


def test_raw_placeholders_match_the_declared_tables():
    """The raw placeholders against the source's `Table` declarations and the bookkeeping.

    Every declared table has a placeholder; every placeholder column is a column the loader
    declares (or dlt's own `_dlt_*`, or the run record's), with the type dlt gives it. A model can
    therefore only read a raw column that a load creates with the same type.
    """
    from esper_warehouse.pipelines import bookkeeping
    from esper_warehouse.sources.esper.tables import TABLES

    con = duckdb.connect(":memory:")
    create_raw_tables(con)  # the placeholders, as the model build creates them
    placeholders: dict[str, dict[str, str]] = {}
    for table, column, kind in con.execute(
        "select table_name, column_name, data_type from information_schema.columns "
        "where table_schema = 'esper'"
    ).fetchall():
        placeholders.setdefault(table, {})[column] = kind
    normal = {"timestamp with time zone": "TIMESTAMP WITH TIME ZONE"}
    declared = {
        name: {c.name: DLT_DUCKDB_TYPES[c.type] for c in schema.columns}
        for name, schema in TABLES.items()
    }
    for name, columns in (
        ("_esper_runs", bookkeeping.RUNS),
        ("_esper_reconciliation", bookkeeping.RECONCILIATION),
        ("_esper_rejected", bookkeeping.REJECTED),
    ):
        declared[name] = {c: normal.get(t, t.upper()) for c, t in columns.items()}

    assert set(TABLES) <= set(placeholders), "declared tables without a placeholder"
    assert set(placeholders) <= set(declared), "placeholders of tables nobody loads"
    problems = [
        f"{table}.{column}: placeholder {kind}, declared {declared[table].get(column)}"
        for table, columns in placeholders.items()
        for column, kind in columns.items()
        if not column.startswith("_dlt_") and declared[table].get(column) != kind
    ]
    assert problems == [], "\n".join(problems)
