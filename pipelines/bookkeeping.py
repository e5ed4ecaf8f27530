"""The pipeline's own tables: `_esper_runs` (one row per run) and `_esper_reconciliation`.

Written with plain SQL through dlt's SQL client (one short transaction, no extra dlt load), so a
run that failed before loading anything still leaves its row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dlt

RUNS = {
    "run_id": "varchar",
    "started_at": "timestamp with time zone",
    "finished_at": "timestamp with time zone",
    "as_of": "timestamp with time zone",
    "mode": "varchar",
    "status": "varchar",
    "requests": "bigint",
    "retries": "bigint",
    "throttled": "bigint",
    "rows": "json",
    "error": "varchar",
    "unavailable": "json",  # table -> why this run skipped it (a partial run), else {}
}
RECONCILIATION = {
    "run_id": "varchar",
    "table_name": "varchar",
    "expected": "bigint",
    "loaded": "bigint",
    "missing": "bigint",
    "duplicates": "bigint",
    "checked_at": "timestamp with time zone",
    "ok": "boolean",
}
ADDED = {
    "_esper_reconciliation": ("duplicates",),
    "_esper_runs": ("unavailable",),
}  # columns added after the first release


def write(
    pipeline: dlt.Pipeline, run: Mapping[str, Any], reconciliation: Sequence[Mapping[str, Any]]
) -> None:
    """Insert the run's row and its reconciliation rows (creating the tables on first use)."""
    with pipeline.sql_client() as client:
        client.create_dataset() if not client.has_dataset() else None
        json_type = "json" if pipeline.destination.destination_name == "duckdb" else "varchar"
        for table, columns, rows in (
            ("_esper_runs", RUNS, [run]),
            ("_esper_reconciliation", RECONCILIATION, reconciliation),
        ):
            name = client.make_qualified_table_name(table)
            ddl = ", ".join(f"{c} {t.replace('json', json_type)}" for c, t in columns.items())
            client.execute_sql(f"create table if not exists {name} ({ddl})")
            for column in ADDED.get(table, ()):  # warehouses made before the column existed
                client.execute_sql(
                    f"alter table {name} add column if not exists {column} {columns[column].replace('json', json_type)}"
                )
            marks = ", ".join(["%s"] * len(columns))
            for row in rows:
                client.execute_sql(
                    f"insert into {name} ({', '.join(columns)}) values ({marks})",
                    *[row.get(c) for c in columns],
                )
