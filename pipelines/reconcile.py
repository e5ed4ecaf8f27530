"""Reconciliation: every complete list read in a run, checked in the warehouse against the API's count.

For each table the source read completely (`RunLedger.scans`), `expected` is the sum of the
counts the API reported, `loaded` the number of keys read in this run that are present in the
warehouse after the load, and `missing = expected - loaded`. Any `missing > 0` fails the run.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import dlt

from sources.esper.ledger import RunLedger
from sources.esper.scan import parse_time
from sources.esper.settings import ENDPOINTS

log = logging.getLogger("esper_warehouse")

TIME_KEYS = {"timestamp", "updated_at"}
CURRENT_ROWS = {"device_apps": "_dlt_valid_to is null"}  # scd2: only rows valid now


def _normal(names: tuple[str, ...], values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Key values comparable between the API (ISO strings) and the warehouse (datetimes)."""
    out = []
    for name, value in zip(names, values, strict=True):
        if name in TIME_KEYS and value is not None:
            ts = parse_time(value)
            value = ts.astimezone(UTC) if ts else None
        out.append(value)
    return tuple(out)


def reconcile(pipeline: dlt.Pipeline, ledger: RunLedger, run_id: str) -> list[dict[str, Any]]:
    """One row per completely read table: expected, loaded, missing, ok."""
    rows: list[dict[str, Any]] = []
    if not ledger.scans:
        return rows
    checked_at = datetime.now(UTC)
    with pipeline.sql_client() as client:
        for table, scan in sorted(ledger.scans.items()):
            key = ENDPOINTS[table].key
            where = f" where {CURRENT_ROWS[table]}" if table in CURRENT_ROWS else ""
            sql = f"select {', '.join(key)} from {client.make_qualified_table_name(table)}{where}"
            try:
                stored = {_normal(key, tuple(r)) for r in client.execute_sql(sql) or []}
            except Exception as error:  # the table was never created: nothing of it loaded
                log.debug("reconcile %s: %s", table, error)
                stored = set()
            read = {_normal(key, k) for k in scan.keys}
            loaded = len(read & stored)
            missing = max(scan.expected - loaded, 0)
            rows.append(
                {
                    "run_id": run_id,
                    "table_name": table,
                    "expected": scan.expected,
                    "loaded": loaded,
                    "missing": missing,
                    "checked_at": checked_at,
                    "ok": missing == 0,
                }
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


def retire_missing_apps(pipeline: dlt.Pipeline, ledger: RunLedger) -> None:
    """Close the app rows of devices that no longer have them, at the run's API time.

    dlt's scd2 retires rows per merge key only when the key has rows in the load, so two cases
    need a hand, or their apps would stay "installed" forever:
    - a device whose complete app list came back empty (or 404);
    - a device gone from the fleet: after a complete device scan (its census is this run's),
      every device not in the census. A nightly run cannot see removals; the weekly scan does.
    """
    empty = sorted(ledger.devices_without_apps)
    census = "devices" in ledger.scans  # only a complete device scan records this scan
    if ledger.as_of is None or not (empty or census):
        return
    with pipeline.sql_client() as client:
        table = client.make_qualified_table_name("device_apps")
        try:
            client.execute_sql(f"select 1 from {table} limit 1")
        except Exception:  # no device_apps table yet: nothing to retire
            return
        current = f"update {table} set _dlt_valid_to = %s where _dlt_valid_to is null and device_id"
        if empty:
            marks = ", ".join(["%s"] * len(empty))
            client.execute_sql(f"{current} in ({marks})", ledger.as_of, *empty)
        if census:
            census_table = client.make_qualified_table_name("device_census")
            client.execute_sql(f"{current} not in (select id from {census_table})", ledger.as_of)
