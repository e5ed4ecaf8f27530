"""sql/marts/_marts.yml, the marts' one description, against the marts as built: every column of
every mart documented exactly once and nothing documented that the mart lacks, its `tests:`
holding on a loaded warehouse, its grain tests saying what sql/tests/grain.csv says.
docs/reference/marts.md is written from it (tests/source/test_declarations.py keeps it current)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import SQL_DIR, build_models
from esper_warehouse.pipelines.tools import mart_docs

from tests.conftest import FirstLoad


@pytest.fixture(scope="module")
def built_columns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each mart's columns, in order, as DuckDB built them (on an empty warehouse: the columns do
    not depend on the rows)."""
    warehouse = tmp_path_factory.mktemp("marts") / "esper.duckdb"
    build_models(warehouse)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "select table_name, column_name from information_schema.columns "
            "where table_schema = 'marts' order by table_name, ordinal_position"
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    return columns


def test_every_mart_is_documented_and_nothing_else(built_columns: dict[str, list[str]]) -> None:
    files = {path.stem for path in (SQL_DIR / "marts").glob("*.sql")}
    assert set(built_columns) == files
    assert set(mart_docs.load()) == files


def test_every_column_of_every_mart_is_documented_exactly_once(
    built_columns: dict[str, list[str]],
) -> None:
    marts = mart_docs.load()
    for name, columns in built_columns.items():
        documented = [c.name for c in marts[name].columns]
        twice = sorted(c for c, n in Counter(documented).items() if n > 1)
        assert twice == [], f"{name}: documented more than once: {twice}"
        assert sorted(set(columns) - set(documented)) == [], f"{name}: undocumented columns"
        assert sorted(set(documented) - set(columns)) == [], f"{name}: documented, not in the mart"


def test_every_mart_says_what_a_row_is_and_what_it_answers() -> None:
    for mart in mart_docs.load().values():
        assert mart.description and mart.grain and mart.answers, mart.name


def test_the_grain_tests_say_what_grain_csv_declares() -> None:
    """`not_null` on every key column grain.csv does not call nullable, never on one it does;
    `unique` exactly on the single-column grains."""
    with (SQL_DIR / "tests" / "grain.csv").open() as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#")) if r]
    grains = {
        relation.removeprefix("marts."): (key.split(), nullable.split())
        for relation, key, nullable in rows
        if relation.startswith("marts.")
    }
    marts = mart_docs.load()
    assert set(grains) == set(marts)
    for name, (key, nullable) in grains.items():
        tests = {c.name: {mart_docs._test_name(t) for t in c.tests} for c in marts[name].columns}
        for column in key:
            assert ("not_null" in tests[column]) == (column not in nullable), (name, column)
        unique = {c for c, kinds in tests.items() if "unique" in kinds}
        assert unique == (set(key) if len(key) == 1 else set()), name


def test_the_documented_tests_hold_on_a_loaded_warehouse(
    shared_modelled_load: FirstLoad,
) -> None:
    """Every `tests:` entry, run as a query on the simulator's first load with the models built."""
    checks = mart_docs.checks()
    assert len(checks) >= 100
    with duckdb.connect(str(shared_modelled_load.warehouse), read_only=True) as con:
        broken = {name: n for name, sql in checks if (n := con.execute(sql).fetchone()[0])}
        tested = {name.split(".")[0] for name, _ in checks}
        empty = [
            m for m in sorted(tested) if not con.sql(f"select 1 from marts.{m} limit 1").fetchall()
        ]
    assert broken == {}
    assert len(empty) <= 3, f"the checks ran on empty marts: {empty}"


def test_a_column_that_breaks_its_tests_is_counted(tmp_path: Path) -> None:
    """The checks can fail: a duplicate, a NULL and a value outside the list are each counted."""
    mart = mart_docs.Mart(
        name="t",
        description="d",
        grain="g",
        answers="a",
        columns=(
            mart_docs.Column("id", "key", ("not_null", "unique")),
            mart_docs.Column("kind", "k", ({"accepted_values": {"values": ["x", "y"]}},)),
        ),
    )
    with duckdb.connect(str(tmp_path / "t.duckdb")) as con:
        con.execute("create schema marts")
        con.execute(
            "create table marts.t as select * from (values (1, 'x'), (1, 'z'), (null, 'y'))"
        )
        con.execute("alter table marts.t rename column col0 to id")
        con.execute("alter table marts.t rename column col1 to kind")
        counts = {
            name: con.execute(sql).fetchone()[0] for name, sql in mart_docs.checks({"t": mart})
        }
    assert counts == {"t.id: not_null": 1, "t.id: unique": 1, "t.kind: accepted_values": 1}
