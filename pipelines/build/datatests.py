"""The data tests of the models (`sql/tests/`), run in the build's transaction.

A grain test is generated from each line of `grain.csv` (for tables and the staging views over
seeds; views are grain-tested by the test suite), and every `sql/tests/*.sql` is a query that must
return no rows. A failure (`DataTestError`) names each test file and shows its first five
offending rows.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from .model_files import SQL_DIR, ModelError

TESTS = "tests"
GRAIN_FILE = "grain.csv"
SHOWN_ROWS = 5
SEED_VIEW = "staging.stg_seeds__"


@dataclass(frozen=True)
class Grain:
    """One line of `sql/tests/grain.csv`: the columns that identify a row of a relation."""

    relation: str
    keys: tuple[str, ...]
    nullable: frozenset[str]


@dataclass(frozen=True)
class DataTest:
    """A query that must return no rows; `describe` turns an offending row into a sentence."""

    name: str
    path: Path
    sql: str
    describe: Callable[[dict[str, Any]], str] | None = None


@dataclass(frozen=True)
class Failure:
    test: DataTest
    rows: int
    shown: list[str]


class DataTestError(ModelError):
    """Data tests failed: the build was rolled back; the message names each test and its rows."""

    def __init__(self, failures: list[Failure], root: Path) -> None:
        self.failures = failures
        self.path = failures[0].test.path
        lines = [
            f"{len(failures)} data test(s) failed; the build was rolled back and the warehouse "
            "is exactly as it was before it:"
        ]
        for failure in failures:
            lines.append(
                f"  {_shown_path(failure.test.path, root)} ({failure.test.name}): "
                f"{failure.rows} offending row(s)"
                + (f", the first {len(failure.shown)}" if failure.rows > len(failure.shown) else "")
                + ":"
            )
            lines += [f"    {text}" for text in failure.shown]
        RuntimeError.__init__(self, "\n".join(lines))


def _shown_path(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def load_grains(sql_dir: Path = SQL_DIR) -> list[Grain]:
    """The grains declared in `sql/tests/grain.csv` (lines starting with `#` are comments)."""
    path = sql_dir / TESTS / GRAIN_FILE
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    grains = []
    for row in csv.DictReader(lines):
        relation = (row.get("relation") or "").strip()
        if not relation:
            continue
        if relation.count(".") != 1:
            raise ModelError(path, f"relation {relation!r} is not `schema.name`")
        keys = tuple((row.get("grain") or "").split())
        nullable = frozenset((row.get("nullable") or "").split())
        if not nullable <= set(keys):
            raise ModelError(path, f"{relation}: nullable {sorted(nullable)} not in its grain")
        grains.append(Grain(relation, keys, nullable))
    return grains


def _seed_file(sql_dir: Path, relation: str) -> str | None:
    """`seed <file>.csv` / `vocabulary <file>.csv` for a seed table or a staging view over one."""
    schema, name = relation.split(".")
    if relation.startswith(SEED_VIEW):
        found = re.search(r"\bseeds\.(\w+)", (sql_dir / "staging" / f"{name}.sql").read_text())
        if found is None:
            return None
        name = found.group(1)
    elif schema != "seeds":
        return None
    kind = "vocabulary" if (sql_dir / "vocabulary" / f"{name}.csv").exists() else "seed"
    return f"{kind} {name}.csv"


def grain_test(grain: Grain, sql_dir: Path = SQL_DIR) -> DataTest:
    """The data test of a grain: no two rows share the key, no key column is NULL (unless nullable)."""
    path = sql_dir / TESTS / GRAIN_FILE
    name = f"{grain.relation}: one row per {', '.join(grain.keys) or 'warehouse'}"
    if not grain.keys:
        sql = f"select count(*) as row_count from {grain.relation} having count(*) <> 1"
        return DataTest(
            name, path, sql, lambda row: f"{grain.relation} has {row['row_count']} rows, expected 1"
        )
    keys = ", ".join(f'"{key}"' for key in grain.keys)
    nulls = " or ".join(f'"{key}" is null' for key in grain.keys if key not in grain.nullable)
    having = "count(*) > 1" + (f" or {nulls}" if nulls else "")
    sql = (
        f"select {keys}, count(*) as row_count from {grain.relation} group by {keys} "
        f"having {having} order by row_count desc"
    )
    source = _seed_file(sql_dir, grain.relation)

    def describe(row: dict[str, Any]) -> str:
        missing = [k for k in grain.keys if row[k] is None and k not in grain.nullable]
        where = source or grain.relation
        if missing:
            return f"{where} has {row['row_count']} row(s) with no {' and no '.join(missing)}"
        values = ", ".join(f"{k} {row[k]}" for k in grain.keys)
        if source:
            return (
                f"{source} has {row['row_count']} rows for {values}; each "
                f"{' and '.join(grain.keys)} must appear once"
            )
        return (
            f"{grain.relation} has {row['row_count']} rows for {values}; its grain is one row "
            f"per {', '.join(grain.keys)}"
        )

    return DataTest(name, path, sql, describe)


def load_data_tests(sql_dir: Path = SQL_DIR, grains: list[Grain] | None = None) -> list[DataTest]:
    """The grain tests of `grains` (default: all of grain.csv), then every `sql/tests/*.sql`."""
    grains = load_grains(sql_dir) if grains is None else grains
    tests = [grain_test(grain, sql_dir) for grain in grains]
    for path in sorted((sql_dir / TESTS).glob("*.sql")):
        tests.append(DataTest(path.stem, path, path.read_text().strip().rstrip(";")))
    return tests


def in_build(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> list[Grain]:
    """The grains the build tests: tables, and the staging views over seeds (a few rows each)."""
    tables = {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_catalog = current_database() and table_type = 'BASE TABLE'"
        ).fetchall()
    }
    return [
        g for g in load_grains(sql_dir) if g.relation in tables or g.relation.startswith(SEED_VIEW)
    ]


def run_data_tests(
    con: duckdb.DuckDBPyConnection, tests: list[DataTest], root: Path | None = None
) -> None:
    """Run each test; raise DataTestError listing every failing one with its first rows.

    Raises ModelError naming the file when a test's query itself fails.
    """
    failures = []
    for test in tests:
        try:
            cursor = con.execute(f"select * from (\n{test.sql}\n) as offending")
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchmany(SHOWN_ROWS)]
            if not rows:
                continue
            more = con.execute(f"select count(*) from (\n{test.sql}\n) as offending").fetchone()
        except duckdb.Error as exc:
            raise ModelError(test.path, f"data test {test.name}: {exc}") from exc
        failures.append(
            Failure(test, int(more[0]) if more else len(rows), [_row_text(test, r) for r in rows])
        )
    if failures:
        raise DataTestError(failures, root if root is not None else SQL_DIR.parent)


def _row_text(test: DataTest, row: dict[str, Any]) -> str:
    if test.describe is not None:
        return test.describe(row)
    if "problem" in row:
        return str(row["problem"])
    return ", ".join(f"{name} {value!r}" for name, value in row.items())
