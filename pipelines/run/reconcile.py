"""Reconciliation: every complete list read in a run, checked in the warehouse against the API's count.

For each table the source read completely (`RunLedger.scans`), `expected` is the sum of the
counts the API reported, `loaded` the number of keys read in this run that are present in the
warehouse after the load, `missing = expected - loaded`, and `duplicates` the rows the table holds
beyond one per key (what the table holds, not what was read). Any `missing > 0` or
`duplicates > 0` fails the run.
"""

from __future__ import annotations

import logging
from array import array
from datetime import UTC, datetime
from typing import Any

import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common.schema.utils import get_columns_names_with_prop, get_validity_column_names
from esper_warehouse.sources.esper.run.ledger import RunLedger, fingerprint

log = logging.getLogger("esper_warehouse")

FETCH_ROWS = 100_000  # warehouse keys are read and fingerprinted this many at a time


def _stored(client: Any, sql: str, key: tuple[str, ...]) -> pa.Array:
    """Fingerprints of the keys a warehouse table holds, one per row (empty if never created)."""
    stored = array("q")
    try:
        with client.execute_query(sql) as cursor:
            while rows := cursor.fetchmany(FETCH_ROWS):
                stored.extend(fingerprint(key, row) for row in rows)
    except Exception as error:  # the table was never created: nothing of it loaded
        log.debug("reconcile: %s", error)
    return pa.array(stored, pa.int64())


def schema_tables(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """The tables of the pipeline's dlt schema, by name (empty before its first extract).

    The bookkeeping after a load (reconciliation, duplicate removal) reads keys and validity
    columns here, never from a list of declared tables: a Data Tap table (named by the user's
    configuration) is in the schema the moment dlt has seen its resource, and in no declaration.
    Read once per step: `pipeline.default_schema` loads and checks the stored schema on every
    access, which cost a sixth of a small run's time when asked per table.
    """
    if not pipeline.default_schema_name:
        return {}
    return dict(pipeline.default_schema.tables)


def primary_key(tables: dict[str, Any], table: str) -> tuple[str, ...]:
    """The columns dlt merges `table` on (its primary key); empty when it has none or is unknown."""
    schema = tables.get(table)
    return tuple(get_columns_names_with_prop(schema, "primary_key")) if schema else ()


def current_rows(tables: dict[str, Any], table: str) -> str:
    """A `where` clause keeping the rows valid now of an scd2 table (its history of versions)."""
    schema = tables.get(table)
    valid_to = get_validity_column_names(schema)[1] if schema else None
    return f" where {valid_to} is null" if valid_to else ""


def reconcile(
    pipeline: dlt.Pipeline, client: Any, ledger: RunLedger, run_id: str
) -> list[dict[str, Any]]:
    """One row per completely read table: expected, loaded, missing, duplicates, ok.

    Args:
        client: The pipeline's open `sql_client` (one per step: opening one resolves dlt's
            destination configuration again).
    """
    rows: list[dict[str, Any]] = []
    scans = list(ledger.scans.completed())
    if not scans:
        return rows
    checked_at = datetime.now(UTC)
    tables = schema_tables(pipeline)
    for table, scan in scans:
        if ledger.refusals.is_skipped(table) or ledger.refusals.is_kept(table):
            continue  # skipped this run (a refused route) or kept as loaded: no shortfall
        key = scan.key or primary_key(tables, table)
        where = current_rows(tables, table)
        listed = ", ".join(client.escape_column_name(c) for c in key)
        sql = f"select {listed} from {client.make_qualified_table_name(table)}{where}"
        read = pa.array(scan.keys, pa.int64()).unique()
        stored = _stored(client, sql, key)
        loaded = pc.sum(pc.is_in(read, value_set=stored)).as_py() or 0
        # the API counted the records set aside (no key: never loaded)
        missing = max(scan.expected - ledger.rejected.count(table) - loaded, 0)
        duplicates = len(stored) - len(stored.unique())
        rows.append(
            {
                "run_id": run_id,
                "table_name": table,
                "expected": scan.expected,
                "loaded": loaded,
                "missing": missing,
                "duplicates": duplicates,
                "checked_at": checked_at,
                "ok": missing == 0 and duplicates == 0,
            }
        )
        if duplicates:
            log.error(
                "reconciliation: %s holds %d row(s) beyond one per key %s",
                table,
                duplicates,
                "(" + ", ".join(key) + ")",
            )
        if missing:
            log.error(
                "reconciliation: %s expected %d (the API's count), loaded %d: %d missing",
                table,
                scan.expected,
                loaded,
                missing,
            )
    return rows


def retire_missing_apps(client: Any, ledger: RunLedger) -> None:
    """Close the app rows of devices that no longer have them, at the run's API time.

    dlt's scd2 retires rows per merge key only when the key has rows in the load, so two cases
    need a hand, or their apps would stay "installed" forever:
    - a device whose complete app list came back empty (or 404);
    - a device gone from the fleet: after a complete device scan (its census is this run's),
      every device not in the census. A nightly run cannot see removals; the weekly scan does.
    """
    empty = ledger.devices.without_apps()
    # only a complete device scan records this scan; a census kept as loaded (a listed device
    # set aside) is not this run's
    census = ledger.scans.has("devices") and not ledger.refusals.is_kept("device_census")
    as_of = ledger.plan.as_of
    if as_of is None or not (empty or census):
        return
    table = client.make_qualified_table_name("device_apps")
    try:
        client.execute_sql(f"select 1 from {table} limit 1")
    except Exception:  # no device_apps table yet: nothing to retire
        return
    current = f"update {table} set _dlt_valid_to = %s where _dlt_valid_to is null and device_id"
    if empty:
        marks = ", ".join(["%s"] * len(empty))
        client.execute_sql(f"{current} in ({marks})", as_of, *empty)
    if census:
        census_table = client.make_qualified_table_name("device_census")
        client.execute_sql(f"{current} not in (select id from {census_table})", as_of)


# How each destination names a row's physical position (a table has no unique column to tell
# two copies of one row apart: their `_dlt_id` is the same too).
ROW_ID = {"duckdb": "rowid", "motherduck": "rowid", "postgres": "ctid"}


# What a note of appended tables that cannot be read stands for (`dispositions.read_appended`).
EVERY_APPENDED_TABLE = "*"


def remove_duplicate_keys(pipeline: dlt.Pipeline, tables: list[str]) -> dict[str, int]:
    """Keep one row per key in tables a load appended into, after that load was interrupted.

    A load job that DuckDB committed but dlt had not yet marked done is run again when its
    package is resumed; for an appended table that inserts its rows twice (merge and
    `insert-only` jobs are idempotent). The row of the newest load is kept.

    The key of each table is the one dlt merges it on, read from the pipeline's schema: declared
    and Data Tap tables alike. A table the schema does not know, or knows without a key, was never
    loaded by an append of this pipeline: nothing to do. `EVERY_APPENDED_TABLE` (a note that could
    not be read) stands for every table of the schema with a key.

    Returns:
        Rows removed per table (only tables that had any).
    """
    row_id = ROW_ID.get(pipeline.destination.destination_name)
    removed: dict[str, int] = {}
    if row_id is None:
        log.warning("cannot remove duplicate rows on %s", pipeline.destination.destination_name)
        return removed
    schema = schema_tables(pipeline)
    if EVERY_APPENDED_TABLE in tables and pipeline.default_schema_name:
        tables = sorted(pipeline.default_schema.data_table_names())
    with pipeline.sql_client() as client:
        for table in tables:
            columns = primary_key(schema, table)
            if not columns:
                continue
            key = ", ".join(client.escape_column_name(c) for c in columns)
            name = client.make_qualified_table_name(table)
            try:
                client.execute_sql(f"select 1 from {name} limit 1")
            except Exception:  # never created: nothing appended into it
                continue
            ranked = (
                f"select {row_id} as row_id, row_number() over (partition by {key} "
                f"order by _dlt_load_id desc) as copy from {name}"
            )
            before = client.execute_sql(f"select count(*) from {name}")[0][0]
            client.execute_sql(
                f"delete from {name} where {row_id} in (select row_id from ({ranked}) as r "
                "where copy > 1)"
            )
            after = client.execute_sql(f"select count(*) from {name}")[0][0]
            if before != after:
                removed[table] = before - after
    return removed
