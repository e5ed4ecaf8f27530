"""Data tests inside the model build (sql/tests/): grains, seed keys, accepted values, references.

A failing data test fails the build, names its file, shows at most five offending rows and leaves
the warehouse exactly as it was (the build is one transaction).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build.datatests import (
    DataTestError,
    grain_test,
    load_grains,
    run_data_tests,
)
from esper_warehouse.pipelines.build.models import LAYERS, SQL_DIR, build_models, load_models

from tests.sql.conftest import TEST_SEEDS, query_fn


def _snapshot(path: Path) -> dict[str, list[tuple]]:
    """Every seed, intermediate table and mart, sorted: what a rollback must leave untouched."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [
            f"{s}.{t}"
            for s, t in con.execute(
                "select table_schema, table_name from information_schema.tables "
                "where table_schema in ('seeds', 'intermediate', 'marts') order by 1, 2"
            ).fetchall()
        ]
        return {name: sorted(map(repr, con.execute(f"from {name}").fetchall())) for name in names}
    finally:
        con.close()


@pytest.fixture
def built(tmp_path, compliance_wh) -> Path:
    """A warehouse of the compliance scenario, built once with the test targets: a copy of the
    session's `compliance_wh` (tests/sql/conftest.py), to spoil."""
    assert not compliance_wh.with_name(compliance_wh.name + ".wal").exists()
    path = tmp_path / "esper.duckdb"
    shutil.copyfile(compliance_wh, path)
    return path


@pytest.fixture(scope="module")
def unspoilt(compliance_wh) -> dict[str, list[tuple]]:
    """`_snapshot` of the warehouse every `built` copies, taken once: what each must still hold."""
    return _snapshot(compliance_wh)


@pytest.fixture
def seeds(tmp_path) -> Path:
    """A copy of the test targets to spoil."""
    folder = tmp_path / "seeds"
    shutil.copytree(TEST_SEEDS, folder)
    return folder


def test_a_duplicate_seed_row_fails_the_build_and_changes_nothing(built, seeds, unspoilt):
    target = seeds / "compliance_platform_targets.csv"
    android = next(line for line in target.read_text().splitlines() if line.startswith("ANDROID"))
    target.write_text(target.read_text() + android + "\n")

    with pytest.raises(DataTestError) as raised:
        build_models(built, seeds=seeds)

    message = str(raised.value)
    assert (
        "seed compliance_platform_targets.csv has 2 rows for platform ANDROID; "
        "each platform must appear once" in message
    )
    assert "sql/tests/grain.csv" in message
    assert "rolled back" in message
    # the marts built from the doubled targets fail their grain too, and are not kept
    assert re.search(r"marts\.fleet_compliance has \d+ rows for device_id", message)
    assert _snapshot(built) == unspoilt


def test_a_lower_case_duplicate_counts_as_the_same_platform(built, seeds):
    target = seeds / "compliance_platform_targets.csv"
    target.write_text(target.read_text() + " android ,12,,\n")
    with pytest.raises(DataTestError, match="2 rows for platform ANDROID"):
        build_models(built, seeds=seeds)


def test_a_misspelt_platform_or_bucket_fails_naming_the_test_file(built, seeds, unspoilt):
    apps = seeds / "compliance_required_apps.csv"
    apps.write_text(apps.read_text() + "ANDRIOD,com.example.app,1.0\n")
    buckets = seeds / "last_seen_buckets.csv"
    buckets.write_text(buckets.read_text().replace("\nactive,", "\nactiv,"))

    with pytest.raises(DataTestError) as raised:
        build_models(built, seeds=seeds)

    message = str(raised.value)
    assert "sql/tests/accepted_platforms.sql" in message
    assert "seed compliance_required_apps.csv: platform ANDRIOD (app com.example.app)" in message
    assert "sql/tests/accepted_last_seen_buckets.sql" in message
    assert "bucket activ is not one of online, active, stale, offline, missing" in message
    assert _snapshot(built) == unspoilt


def test_a_mart_off_its_grain_fails_showing_at_most_five_rows(built, tmp_path, unspoilt):
    sql_dir = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql_dir)
    mart = sql_dir / "marts" / "fleet_compliance.sql"
    body = mart.read_text().rstrip().rstrip(";")
    # every device twice: the bug a fan-out join makes
    mart.write_text(
        body.replace("select * from final", "select * from final union all select * from final")
    )
    assert "union all select * from final" in mart.read_text()

    with pytest.raises(DataTestError) as raised:
        build_models(built, sql_dir=sql_dir)

    message = str(raised.value)
    devices = query_fn(built)("select count(*) as n from marts.fleet_compliance")[0]["n"]
    assert devices > 5
    assert (
        f"(marts.fleet_compliance: one row per device_id): {devices} offending row(s), the first 5:"
        in message
    )
    assert message.count("marts.fleet_compliance has 2 rows for device_id") == 5
    assert _snapshot(built) == unspoilt


def test_a_failing_sql_test_shows_its_rows(built, tmp_path):
    sql_dir = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql_dir)
    (sql_dir / "tests" / "no_android.sql").write_text(
        "-- a test that fails on this fleet\n"
        "select device_id, platform from marts.fleet_compliance where platform = 'ANDROID'\n"
    )
    with pytest.raises(DataTestError) as raised:
        build_models(built, sql_dir=sql_dir)
    message = str(raised.value)
    assert "sql/tests/no_android.sql (no_android)" in message
    assert "platform 'ANDROID'" in message


def test_every_mart_and_intermediate_model_declares_its_grain():
    declared = {grain.relation for grain in load_grains()}
    models = {m.relation for layer in LAYERS[1:] for m in load_models(SQL_DIR, layer)}
    assert models - declared == set(), "add these to sql/tests/grain.csv"
    seed_views = {m.relation for m in load_models(SQL_DIR, "staging") if "stg_seeds__" in m.name}
    vocabulary = {f"seeds.{p.stem}" for p in (SQL_DIR / "vocabulary").glob("*.csv")}
    assert seed_views | vocabulary <= declared
    assert declared <= models | seed_views | vocabulary, (
        "grain.csv names relations that do not exist"
    )


NON_EMPTY = {
    "compliance_wh": ("marts.fleet_compliance", "intermediate.int_device_days"),
    "rollout_wh": ("marts.app_rollout", "intermediate.int_device_app_versions"),
    "commands_wh": ("marts.command_rollout", "marts.operation_rollout"),
}


@pytest.mark.parametrize("fixture", sorted(NON_EMPTY))
def test_every_declared_grain_holds_on_the_fixture_warehouses(fixture, request):
    """Views are not grain-tested in the build (a view's test re-runs it); here they all are."""
    path = request.getfixturevalue(fixture)
    con = duckdb.connect(str(path), read_only=True)
    try:
        run_data_tests(con, [grain_test(grain) for grain in load_grains()])
        counts = {
            name: con.execute(f"select count(*) from {name}").fetchone()[0]  # type: ignore[index]
            for name in NON_EMPTY[fixture]
        }
    finally:
        con.close()
    assert all(counts.values()), counts  # checked on rows, not on empty relations
