"""The raw tables the SQL models may read, derived from the source's declarations (no SQL file).

Every `Table` of `sources/esper/tables/` gives its declared columns, typed as dlt types them in
DuckDB; the run bookkeeping (`bookkeeping.py`) gives `_esper_runs`. The model build creates a
missing raw table empty from these (`models._create_raw_placeholders`), so every model builds before the
first load, and gives an existing one the declared columns it lacks (a warehouse loaded by an
earlier release). Dagster's raw assets and the SQL tests' fixture warehouses use the same list.
"""

from __future__ import annotations

from esper_warehouse.sources.esper.tables import TABLES

from .run import bookkeeping

# dlt data type -> the DuckDB type dlt gives the column
DUCKDB_TYPES = {
    "text": "varchar",
    "bigint": "bigint",
    "double": "double",
    "bool": "boolean",
    "timestamp": "timestamptz",
    "json": "json",
}


# The validity range dlt adds to an scd2 table (its default column names), which staging reads.
SCD2_COLUMNS = [("_dlt_valid_from", "timestamptz"), ("_dlt_valid_to", "timestamptz")]


def raw_tables() -> dict[str, list[tuple[str, str]]]:
    """Raw table -> [(column, DuckDB type)]: every declared table, then `_esper_runs`."""
    tables = {
        name: [
            *((c.name, DUCKDB_TYPES[c.type]) for c in table.columns),
            *(SCD2_COLUMNS if table.disposition == "scd2" else []),
        ]
        for name, table in TABLES.items()
    }
    tables["_esper_runs"] = [
        (column, kind.replace("timestamp with time zone", "timestamptz"))
        for column, kind in bookkeeping.RUNS.items()
    ]
    return tables


def create_statement(name: str, columns: list[tuple[str, str]], schema: str = "esper") -> str:
    """`create table <schema>.<name> (...)` for one raw table."""
    defs = ",\n".join(f"    {column} {kind}" for column, kind in columns)
    return f"create table {schema}.{name} (\n{defs}\n)"
