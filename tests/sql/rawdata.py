"""Hand-built raw warehouses for the SQL model tests.

The raw tables are created from the source's declarations (`pipelines/build/raw_contract.py`) and filled from Python dicts: a missing key is NULL, lists and dicts become JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build import raw_contract

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def raw_columns() -> dict[str, list[tuple[str, str]]]:
    """Raw table name -> [(column, DuckDB type)], as the source declares them."""
    return raw_contract.raw_tables()


def _schema(con: duckdb.DuckDBPyConnection) -> str:
    """`"<catalog>".esper`: unambiguous even in a file called esper.duckdb."""
    row = con.execute("select current_database()").fetchone()
    return f'"{row[0]}".esper' if row else "esper"


def create_raw_tables(
    con: duckdb.DuckDBPyConnection,
    tables: Sequence[str] | None = None,
    *,
    as_text: bool = False,
) -> None:
    """Create raw tables (all by default). as_text: JSON and TIMESTAMPTZ columns become VARCHAR,
    as a loader that keeps JSON as text and timestamps as ISO strings would leave them."""
    con.execute(f"create schema if not exists {_schema(con)}")
    for name, columns in raw_columns().items():
        if tables is not None and name not in tables:
            continue
        defs = ", ".join(
            f"{column} {'varchar' if as_text and kind in ('json', 'timestamptz') else kind}"
            for column, kind in columns
        )
        con.execute(f"create table {_schema(con)}.{name} ({defs})")


def _value(value: object) -> object:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def insert_rows(
    con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Mapping[str, object]]
) -> None:
    """Insert dict rows into esper.<table>; unknown keys are an error, missing keys are NULL."""
    if not rows:
        return
    columns = [column for column, _ in raw_columns()[table]]
    for row in rows:
        unknown = set(row) - set(columns)
        if unknown:
            raise KeyError(f"{table}: not a contract column: {sorted(unknown)}")
    placeholders = ", ".join("?" for _ in columns)
    con.executemany(
        f"insert into {_schema(con)}.{table} ({', '.join(columns)}) values ({placeholders})",
        [[_value(row.get(column)) for column in columns] for row in rows],
    )


def make_warehouse(
    path: Path, data: Mapping[str, Sequence[Mapping[str, object]]], *, as_text: bool = False
) -> Path:
    """A warehouse file with every raw table created and `data` (table -> rows) inserted."""
    con = duckdb.connect(str(path))
    try:
        create_raw_tables(con, as_text=as_text)
        for table, rows in data.items():
            insert_rows(con, table, rows)
    finally:
        con.close()
    return path
