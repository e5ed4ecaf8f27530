"""The raw tables the SQL models may read, derived from the source's declarations (no SQL file).

Every `Table` of `sources/esper/tables/` gives its declared columns, typed as dlt types them in
DuckDB; the run bookkeeping (`bookkeeping.py`) gives `_esper_runs`. The model build creates a
missing raw table empty from these (`models._create_raw_placeholders`), so every model builds before the
first load, and gives an existing one the declared columns it lacks (a warehouse loaded by an
earlier release). Dagster's raw assets and the SQL tests' fixture warehouses use the same list.
"""

from __future__ import annotations

from esper_warehouse.sources.esper.tables import FAMILY, FAMILY_LABELS, TABLES

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
