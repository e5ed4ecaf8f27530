"""The pipeline's own tables: `_esper_runs` (one row per run), `_esper_reconciliation` and
`_esper_rejected` (the records a run set aside).

Written with plain SQL through dlt's SQL client (one short transaction, no extra dlt load), so a
run that failed before loading anything still leaves its row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `status` reads this module without dlt (~1 s)
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
    "parts": "bigint",  # parts committed before the last (or failed) one: 0 = one part
    "unreadable": "json",  # table.column -> values read as NULL (arrow.Unreadable), else {}
    "answered": "bigint",  # requests answered (not 429)
    "answered_per_s": "double",  # ... per second, from the first request sent to the last answer
    "not_ours": "bigint",  # 429s the client judged not caused by this run's pace (the weather)
    "pace": "double",  # requests/s the client paced itself at when the run ended (NULL: unpaced)
    # table -> how the run treated it: {"treatment": loaded | partial | kept | skipped, "route",
    # "status", "read_from", "why"}, for every table its resources read (int_table_freshness)
    "tables": "json",
    "device_count": "bigint",  # the API's device count as the run opened (NULL: not read)
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
# One row per record a run set aside (sources/esper/run/set_aside.py): served without its
# table's key, cursor or parent key, so never loaded; kept for the admin, redacted and cut.
REJECTED = {
    "run_id": "varchar",
    "table_name": "varchar",
    "route": "varchar",  # the route's template, e.g. /enterprise/{eid}/devicegroup/
    "column_name": "varchar",  # the column the record was served without
    "reason": "varchar",
    "record": "varchar",  # the record as JSON, the API key taken out, cut short
    "rejected_at": "timestamp with time zone",
}
ADDED = {
    "_esper_reconciliation": ("duplicates",),
    "_esper_runs": (
        "unavailable",
        "parts",
        "unreadable",
        "answered",
        "answered_per_s",
        "not_ours",
        "pace",
        "tables",
        "device_count",
    ),
}  # columns added after the first release


def write(
    pipeline: dlt.Pipeline,
    run: Mapping[str, Any],
    reconciliation: Sequence[Mapping[str, Any]],
    client: Any = None,
    rejected: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Insert the run's row, its reconciliation rows and the records it set aside (creating
    the tables on first use).

    `client`: an open `sql_client` of the pipeline to write through (else one is opened).
    """
    with nullcontext(client) if client is not None else pipeline.sql_client() as client:
        client.create_dataset() if not client.has_dataset() else None
        duckdb = pipeline.destination.destination_name == "duckdb"
        # Column types are DuckDB's; elsewhere (Postgres) json is text and double is spelled out.
        names = {
            "json": "json" if duckdb else "varchar",
            "double": "double" if duckdb else "double precision",
        }
        # One commit for the record: each statement would otherwise be its own (and DuckDB
        # syncs its log at each).
        with client.begin_transaction():
            for table, columns, rows in (
                ("_esper_runs", RUNS, [run]),
                ("_esper_reconciliation", RECONCILIATION, reconciliation),
                ("_esper_rejected", REJECTED, rejected),
            ):
                typed = {c: names.get(t, t) for c, t in columns.items()}
                _write_table(client, table, typed, rows, duckdb)
                if table == "_esper_runs" and run.get("status") != STARTED:
                    _drop_started(client, run["run_id"])  # the row it wrote as it started


def _drop_started(client: Any, run_id: str) -> None:
    """Remove the run's own `started` row, once its outcome is written beside it."""
    if not run_id.isalnum():  # the runner's own hex id: nothing to quote
        raise ValueError(f"unexpected run id {run_id!r}")
    name = client.make_qualified_table_name("_esper_runs")
    client.execute_sql(f"delete from {name} where run_id = '{run_id}' and status = '{STARTED}'")


def _write_table(
    client: Any,
    table: str,
    columns: Mapping[str, str],
    rows: Sequence[Mapping[str, Any]],
    duckdb: bool,
) -> None:
    """Create `table` with `columns` (name -> type) or add those it lacks; insert `rows`."""
    name = client.make_qualified_table_name(table)
    ddl = ", ".join(f"{c} {t}" for c, t in columns.items())
    client.execute_sql(f"create table if not exists {name} ({ddl})")
    for column in ADDED.get(table, ()):  # warehouses made before the column existed
        client.execute_sql(
            f"alter table {name} add column if not exists {column} {columns[column]}"
        )
    if not rows:
        return
    listed = ", ".join(columns)
    if not duckdb:
        marks = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
        client.execute_sql(
            f"insert into {name} ({listed}) values {marks}",
            *[row.get(c) for row in rows for c in columns],
        )
        return
    # DuckDB reads the rows as an Arrow table: as query parameters, each value cost it a failed
    # `import pandas` (~0.1 ms), ~50 ms for the ~30 reconciliation rows of a full run.
    import pyarrow as pa  # only here: `status` imports this module and never writes

    types = {
        "varchar": pa.string(),
        "json": pa.string(),
        "timestamp with time zone": pa.timestamp("us", tz="UTC"),
        "bigint": pa.int64(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
    }
    schema = pa.schema([(c, types[t]) for c, t in columns.items()])
    values = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows], schema)
    client.native_connection.register("_esper_rows", values)
    try:
        client.execute_sql(f"insert into {name} ({listed}) select {listed} from _esper_rows")
    finally:
        client.native_connection.unregister("_esper_rows")


def unreadable_lines(unreadable: dict[str, int]) -> list[str]:
    """What the summary and `status` say of values a run read as NULL, one line per column:
    ``3 values unreadable in devices.last_seen (loaded as NULL)``."""
    return [
        f"{count:,} value{'s' if count != 1 else ''} unreadable in {column} (loaded as NULL)"
        for column, count in sorted(unreadable.items())
    ]


# The status of the row a run writes as it starts (sql/vocabulary/run_statuses.csv): its outcome
# replaces it; left alone, the run never ended (killed, or the machine stopped).
STARTED = "started"

# A full scan that ended with these statuses did not walk the whole device list.
UNFINISHED = ("failed", "interrupted", STARTED)


def unfinished_first_load(con: Any, ds: str) -> str | None:
    """What `status` and `models` say when devices are loaded but no full scan has completed.

    A first load in parts (sources/esper/scan/walk.py) commits devices part by part: until one full
    scan ends, the warehouse holds part of the fleet. None when there is no such first load.

    Args:
        con: a DuckDB connection to the warehouse.
        ds: the dataset's qualified schema name (e.g. `"catalog"."esper"`).
    """
    schema = ds.rsplit(".", 1)[-1].strip('"')
    tables = {
        r[0]
        for r in con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [schema]
        ).fetchall()
    }
    if "devices" not in tables:
        return None
    devices = con.execute(f"select count(distinct id) from {ds}.devices").fetchone()[0]
    if not devices:
        return None
    if "_esper_runs" in tables:
        marks = ", ".join(f"'{s}'" for s in UNFINISHED)
        done = con.execute(
            f"select count(*) from {ds}._esper_runs where mode = 'full' and status not in ({marks})"
        ).fetchone()[0]
        if done:
            return None
    return (
        f"the first load is unfinished: {devices:,} device(s) loaded so far by committed parts; "
        "`esper-warehouse run` goes on from them"
    )
