"""The raw tables the SQL models may read, derived from the source's declarations (no SQL file).

Every `Table` of `sources/esper/tables/` gives its declared columns, typed as dlt types them in
DuckDB; the run bookkeeping (`bookkeeping.py`) gives `_esper_runs`. The model build stands in
for a raw table not loaded yet with an empty one of these columns in the schema `PLACEHOLDERS`
(never in the raw dataset, which is dlt's: see `earlier_placeholders`), so every model builds
before the first load, and gives an existing one the declared columns it lacks (a warehouse
loaded by an earlier release). Dagster's raw assets and the SQL tests' fixture warehouses use the
same list.
"""

from __future__ import annotations

import duckdb
from esper_warehouse.sources.esper.tables import FAMILY, FAMILY_LABELS, TABLES

from .. import bookkeeping

# dlt data type -> the DuckDB type dlt gives the column
DUCKDB_TYPES = {
    "text": "varchar",
    "bigint": "bigint",
    "double": "double",
    "bool": "boolean",
    "timestamp": "timestamptz",
    "json": "json",
}


# Where the model build keeps the empty stand-in of each raw table not loaded yet. Not the raw
# dataset: dlt creates and alters the tables there, and meets a table it did not create as one
# to alter (docs/decisions.md, "Placeholders outside the raw dataset").
PLACEHOLDERS = "raw_placeholders"

# The validity range dlt adds to an scd2 table (its default column names), which staging reads.
SCD2_COLUMNS = [("_dlt_valid_from", "timestamptz"), ("_dlt_valid_to", "timestamptz")]


def raw_tables() -> dict[str, list[tuple[str, str]]]:
    """Raw table -> [(column, DuckDB type)]: every declared table, then `_esper_runs` and
    `_esper_rejected`."""
    tables = {
        name: [
            *((c.name, DUCKDB_TYPES[c.type]) for c in table.columns),
            *(SCD2_COLUMNS if table.disposition == "scd2" else []),
        ]
        for name, table in TABLES.items()
    }
    for name, columns in (
        ("_esper_runs", bookkeeping.RUNS),
        ("_esper_rejected", bookkeeping.REJECTED),
    ):
        tables[name] = [
            (column, kind.replace("timestamp with time zone", "timestamptz"))
            for column, kind in columns.items()
        ]
    return tables


def table_families() -> list[tuple[str, str, str]]:
    """(table, family, family label) of every declared table: the model build's
    `seeds.table_families`, which the freshness models group by (Data Tap tables are not
    declared: each is a family of its own there)."""
    return [(name, FAMILY[name], FAMILY_LABELS[FAMILY[name]]) for name in TABLES]


def create_statement(name: str, columns: list[tuple[str, str]], schema: str = "esper") -> str:
    """`create table <schema>.<name> (...)` for one raw table."""
    defs = ",\n".join(f"    {column} {kind}" for column, kind in columns)
    return f"create table {schema}.{name} (\n{defs}\n)"


def earlier_placeholders(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    """The declared raw tables of `dataset` in this file that an earlier release's model build
    created empty there, and that dlt never loaded: neither `_dlt_load_id` nor `_dlt_id` (dlt
    gives every table it creates both, `pipeline.DLT_DEFAULTS`), and no row.

    dlt cannot load into them: it adds its NOT NULL columns to a table it finds in storage, which
    DuckDB refuses ("Adding columns with constraints not yet supported"), and every later run
    failed on its pending package.
    """
    rows = con.execute(
        "select t.table_name from information_schema.tables t "
        "where t.table_catalog = current_database() and t.table_schema = ? "
        "and t.table_type = 'BASE TABLE' and not exists ("
        "  select 1 from information_schema.columns c "
        "  where c.table_catalog = t.table_catalog and c.table_schema = t.table_schema "
        "  and c.table_name = t.table_name and c.column_name in ('_dlt_load_id', '_dlt_id'))",
        [dataset],
    ).fetchall()
    found = []
    for (table,) in rows:
        if table not in TABLES:  # the bookkeeping's own tables, a user's: never dlt's
            continue
        qualified = f'"{_catalog(con)}"."{dataset}"."{table}"'
        if con.execute(f"select count(*) = 0 from {qualified}").fetchone() == (True,):
            found.append(table)
    return found


def drop_earlier_placeholders(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    """Drop `earlier_placeholders` (empty: nothing is lost) so that dlt creates each table the day
    it loads one; returns their names."""
    dropped = earlier_placeholders(con, dataset)
    for table in dropped:
        con.execute(f'drop table "{_catalog(con)}"."{dataset}"."{table}"')
    return dropped


def _catalog(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("select current_database()").fetchone()
    return str(row[0]) if row else ""
