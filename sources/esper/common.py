"""Shared by every resource: the run's options, cursors in dlt state, routes, page -> Arrow.

Cursors live in the source's dlt state (`cursors`), written only after a resource has yielded
everything it read, so a run that fails part-way leaves them where they were (dlt commits state
together with the load package).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import dlt
import pyarrow as pa

from .arrow import ROW_VERSION, to_arrow
from .http import EsperAPIError, EsperClient, EsperError, EsperUnavailableError
from .ledger import RunLedger
from .pagination import parse_page
from .scan import iso, parse_time
from .schemas import SCHEMAS
from .settings import ENDPOINTS

log = logging.getLogger("esper_warehouse.source")

ROWS_PER_BATCH = 20_000  # fan-out rows gathered into one Arrow table before it goes to dlt


@dataclass(frozen=True)
class Options:
    """The settings the resources read (see `settings.py` for their defaults)."""

    lag: timedelta
    status_batch_size: int
    heartbeat_start: timedelta
    page_size: int | None = None  # None: each endpoint's own (the largest the route allows)


def hints_of(table: str) -> dict[str, Any]:
    """The dlt hints of a raw table, all from its declaration: `@dlt.resource(**hints_of(t))`.

    Name, primary key, merge key and write disposition come from `settings.ENDPOINTS`, the
    column types from `schemas.SCHEMAS`. An scd2 table gets no primary key (its rows are
    versions) but its merge key and its row version column, which `page_table(..., row_hash=True)`
    fills (dlt gives that column its hints); its validity boundary (the run's API time) is added
    per run in `__init__.py`.

    Returns:
        Keyword arguments of `dlt.resource` / `dlt.transformer`.
    """
    endpoint = ENDPOINTS[table]
    hints: dict[str, Any] = {"name": table, "columns": SCHEMAS[table].dlt_columns()}
    if endpoint.disposition == "scd2":
        hints["merge_key"] = endpoint.merge_key
        hints["write_disposition"] = {
            "disposition": "merge",
            "strategy": "scd2",
            "row_version_column_name": ROW_VERSION,
        }
        return hints
    if endpoint.key:
        hints["primary_key"] = endpoint.key
    if endpoint.disposition == "insert-only":
        hints["write_disposition"] = {"disposition": "merge", "strategy": "insert-only"}
    else:
        hints["write_disposition"] = endpoint.disposition
    return hints


def cursor_of(table: str) -> str:
    """The record field a table's watermark follows (`settings.ENDPOINTS[table].cursor`)."""
    cursor = ENDPOINTS[table].cursor
    if cursor is None:
        raise ValueError(f"{table} declares no cursor (sources/esper/settings.py)")
    return cursor


def cursor_state() -> dict[str, Any]:
    return dlt.current.source_state().setdefault("cursors", {})  # type: ignore[no-any-return]


# The API time of a first load's first committed part (state, written by every part until the
# first load completes): a run that resumes it treats what happened since as activity.
FIRST_LOAD_STARTED = "first_load_started_at"


def read_from(
    name: str, lag: timedelta, ledger: RunLedger, *, also_full: bool = False
) -> datetime | None:
    """Where an incremental read starts: the stored watermark minus the lag; None = everything.

    `also_full`: the watermark holds on a full scan too (a cursor that says which rows moved,
    not how much to read: command-status and operation-device activity).
    """
    mark = cursor_state().get(name)
    if also_full and not mark and ledger.resumed_from is not None:
        # a resumed first load: everything since its first part committed is activity
        return ledger.resumed_from - lag
    if (ledger.full_scan and not also_full) or not mark:
        return None
    return parse_time(mark) - lag  # type: ignore[operator]


def advance_cursor(name: str, newest: datetime | None) -> None:
    """Move a watermark forward (never back) once everything up to it has been yielded."""
    if newest is None:
        return
    state = cursor_state()
    old = parse_time(state.get(name))
    if old is None or newest > old:
        state[name] = iso(newest)


def page_limit(table: str, opts: Options) -> int:
    return min(opts.page_size or ENDPOINTS[table].page_size, ENDPOINTS[table].page_size)


def endpoint_path(table: str, client: EsperClient, parent: str | None = None) -> str:
    return ENDPOINTS[table].path.format(eid=client.enterprise_id, id=parent)


def page_table(table: str, items: list[dict], **kwargs: Any) -> pa.Table:
    return to_arrow(items, SCHEMAS[table], **kwargs)


def device_count(client: EsperClient) -> int | None:
    """The API's device count: offset mode with limit=1 (cursor pages carry no count)."""
    body = client.get(ENDPOINTS["devices"].path, {"limit": 1, "offset": 0})
    return parse_page(body, where=ENDPOINTS["devices"].path).count


def open_run(client: EsperClient, ledger: RunLedger, full_scan: bool, interval: timedelta) -> None:
    """Start a run: check the key and the tenant, read the API's clock, decide on a full scan.

    Two requests: the device count (a wrong key fails here, and its `Date` is the API's now, the
    time this run's windows and validity ranges use), then one group (a wrong enterprise id fails
    here; otherwise every Android device's legacy list would look gone). A full scan happens on
    the first run, when asked, or when the last one is older than `interval`.
    """
    ledger.client = client
    ledger.device_count = device_count(client)
    check_enterprise(client)
    client.settings_proven = True
    ledger.as_of = client.server_time or datetime.now(UTC)
    last_full = parse_time(cursor_state().get("devices_full_scan_at"))
    ledger.completed_full_scan = last_full is not None
    if last_full is None:  # a first load; committed parts of an earlier run make it a resume
        ledger.resumed_from = parse_time(cursor_state().get(FIRST_LOAD_STARTED))
    ledger.full_scan = bool(full_scan or last_full is None or ledger.as_of - last_full >= interval)


def check_enterprise(client: EsperClient) -> None:
    """One tenant-level legacy request: a wrong enterprise id fails here, clearly (404)."""
    client.get(endpoint_path("groups", client), {"limit": 1, "offset": 0})


def apps_route(item: dict) -> str | None:
    """Where a device's apps are listed: Android legacy route, Apple/Windows v2, else none."""
    platform = f"{item.get('platform')} {item.get('os')}".lower()
    if "android" in platform:
        return "legacy"
    if any(p in platform for p in ("apple", "ios", "windows", "tvos", "macos")):
        return "v2"
    return None


@contextmanager
def skip_unavailable(ledger: RunLedger, table: str) -> Iterator[None]:
    """Skip `table` for this run when the API refuses one of its tenant-level routes.

    The client raises `EsperUnavailableError` (a 403/404 after `open_run` proved the settings);
    this names the table, records it in the ledger, logs one line and ends the resource
    quietly, so the exception never crosses dlt's extract (no half-run generators).
    """
    try:
        yield
    except EsperUnavailableError as error:
        ledger.mark_unavailable(table or error.table, error)
        keep_what_was_loaded()


def keep_what_was_loaded() -> None:
    """Let the table of the resource running now keep its rows although it yields nothing.

    dlt truncates the table of a `replace` resource that yielded no data at the end of the
    extract; a table skipped in this run (refused route, Data Tap quota) must instead keep what
    earlier runs loaded. An empty `append` changes nothing, and the next run's resource is
    `replace` again.
    """
    try:
        resource = dlt.current.resource()
    except Exception:  # not inside a pipeline's extract (a resource iterated by hand)
        return
    if resource.write_disposition == "replace":
        resource.apply_hints(write_disposition="append")


DEVICE_REFUSALS = {
    400: "the route does not serve this device: the legacy routes are Android only",
    403: "refused for this device: a scope or plan feature",
}


def skip_refused_device(ledger: RunLedger, table: str, error: EsperError) -> bool:
    """True (and counted) when one device's route refused it (400/403): skip that device's part.

    Nothing of the device is loaded, so its watermark (taken from the loaded rows) does not
    move and the next run asks again. Other errors are the run's: the caller re-raises them.
    """
    refused = isinstance(error, EsperAPIError | EsperUnavailableError)
    if not refused or error.status not in DEVICE_REFUSALS or error.route is None:
        return False
    ledger.skip_device(table, error.route, error.status, DEVICE_REFUSALS[error.status])
    return True
