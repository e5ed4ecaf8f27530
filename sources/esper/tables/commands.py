"""What admins ask devices to do: command requests and their statuses, operations and their devices."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa

from ..common import (
    REFUSED,
    ROWS_PER_BATCH,
    Options,
    OtherParent,
    note_listed,
    of_parent,
    refuse_other_parents,
    refused_part,
    unless_skipped,
)
from ..http import EsperClient, EsperError
from ..http.pages import batches, fan_out, first_seen, iter_pages, read_all, url_id
from ..run.ledger import RunLedger
from ..run.state import (
    OPEN_OPERATIONS,
    OPEN_REQUESTS,
    OPERATION_DEVICES_SEEN,
    STATUSES_SEEN,
    EarlyStop,
    advance_watermark,
    is_loaded,
    kept_state,
    loaded_versions,
    read_from,
)
from ..settings import EsperSourceConfiguration as Settings
from ..table import INT, JSON, TS, Col, Doc, Table, cols
from ..vocabulary import is_terminal

log = logging.getLogger("esper_warehouse.source")

COMMAND_REQUESTS = Table(
    "command_requests",
    "/commands/v0/commands/",
    ("id",),
    "created_at",
    columns=(
        *cols("id enterprise command_type command device_type schedule reason alias"),
        *cols("created_by issued_by"),
        *cols("command_args devices groups schedule_args status", JSON),
        *cols("created_at created_on updated_at", TS),
    ),
    doc=Doc(
        kept="early stop only while the pages seen run newest first",
        envelope="cc-list; `groups`, `reason`, `schedule_args`, `alias` null when unset",
    ),
)
COMMAND_STATUSES = Table(
    "command_statuses",
    "/commands/v0/status/",
    ("id",),
    "updated_at",
    columns=(
        *cols("id request device state reason command"),
        Col("requeue_value", INT),
        *cols("command_args issued_by command_meta", JSON),
        *cols("created_at updated_at created_on updated_on", TS),
    ),
    probe=False,  # needs request (or device) ids: doctor probes it by hand
    needs=("command_requests",),  # the requests new in this run (`CommandNews.new_requests`)
    doc=Doc(
        read=f"(`request=<ids>`, {Settings.status_batch_size} ids a call: `status_batch_size`)",
        kept="requests new or still open",
        envelope="cc-list",
    ),
)
OPERATIONS = Table(
    "operations",
    "/v0/operations/",
    ("id",),
    "updated_at",
    columns=(
        *cols("id operation state alias reason schedule_type created_by updated_by"),
        *cols("schedule_args operation_device_query arguments", JSON),
        *cols("operation_stats operation_activity", JSON),
        *cols("created_at updated_at", TS),
    ),
    doc=Doc(
        read="(`ordering=-updated_at`)",
        kept="stop at the watermark − lag",
        envelope="content-list (previous)",
    ),
    family="operations",
)
OPERATION_DEVICES = Table(
    "operation_devices",
    "/v0/operations/{id}/devices/",
    ("id",),
    "updated_at",
    columns=(
        *cols("id operation_id device_id state reason"),
        Col("device_operation_activity", JSON),
        *cols("created_at updated_at", TS),
    ),
    needs=("operations",),  # the operations changed in this run (`CommandNews.changed_operations`)
    doc=Doc(
        kept="operations new or not yet terminal, or whose list was refused last time",
        envelope="content-list (previous)",
    ),
    family="operations",
)
TABLES = (COMMAND_REQUESTS, COMMAND_STATUSES, OPERATIONS, OPERATION_DEVICES)
# The tables whose rows tell a device's activity (its feed is read), with the watermark of the
# newest row read: what moved since.
ACTIVITY_SEEN = {
    COMMAND_STATUSES.name: STATUSES_SEEN,
    OPERATION_DEVICES.name: OPERATION_DEVICES_SEEN,
}
TABLES_BY_NAME = {table.name: table for table in TABLES}


# --------------------------------------------------------------- commands and operations


def _desc_list(
    table: Table,
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    params: dict | None = None,
    *,
    fallback: str | None = None,
) -> Iterator[tuple[pa.Table, list[dict]]]:
    """A list read newest first by the table's cursor, with an early stop; a complete read is
    reconciled. `fallback`: the field read where an item lacks the cursor."""
    since = read_from(table.name, opts.lag, ledger)
    cursor = table.cursor_field
    scan = EarlyStop((cursor, fallback) if fallback else cursor, since)
    key = table.key
    seen: set[tuple[Any, ...]] = set()
    count = 0
    path, limit = table.path_for(client), table.limit(opts.page_size)
    pages = iter_pages(client, path, params, limit=limit, paginator=table.paginator)
    for page, fresh in scan.pages(pages):
        count = max(count, page.count or 0)
        # a complete read keeps every item as fresh; one without its key or cursor set aside
        items = table.keyed(first_seen(fresh, seen, key), ledger)
        note_listed(ledger, table, items)  # read this run: a 404 on their routes retires none
        if items:
            yield table.page(items, ledger), items
    if since is None:  # a complete read of the whole list: reconcile it with its count
        ledger.scans.add(table.name, count, (dict(zip(key, k, strict=True)) for k in seen), key)
    advance_watermark(table.name, scan.newest)


@dlt.resource(**COMMAND_REQUESTS.hints())
def command_requests(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Newest first is not documented: stop early only while the observed order supports it."""
    yield from unless_skipped(
        ledger, COMMAND_REQUESTS.name, lambda: _requests(client, ledger, opts)
    )


def _requests(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    for table, fresh in _desc_list(COMMAND_REQUESTS, client, ledger, opts, fallback="created_on"):
        ledger.commands.requests_listed(i["id"] for i in fresh)
        yield table


def _activity(table: Table, ledger: RunLedger, opts: Options) -> Callable[[dict], bool]:
    """Whether a row of `table` read now is activity for its device's feed: it moved since the
    last run (its cursor at or after that run's newest, less the lag), and is not a version the
    warehouse holds already (`loaded_versions`: a row read again within the lag, whose events
    the run that loaded it read)."""
    since = read_from(ACTIVITY_SEEN[table.name], opts.lag, ledger, also_full=True)
    loaded = loaded_versions(ledger, table.name, table.cursor_field, since)

    def moved(item: dict) -> bool:
        ts = table.cursor_time(item)
        if since is not None and ts is not None and ts < since:
            return False
        return not is_loaded(loaded, item.get("id"), item.get(table.cursor_field))

    return moved


def read_loaded(ledger: RunLedger, opts: Options) -> None:
    """Read the versions the activity is told from, in the thread building the source."""
    for name in ACTIVITY_SEEN:
        _activity(TABLES_BY_NAME[name], ledger, opts)


@dlt.resource(**COMMAND_STATUSES.hints())
def command_statuses(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Statuses of requests new in this run or still open, `request=` batches fetched together.

    The open request ids are kept in dlt state; a request leaves it once all its statuses are
    terminal (sql/vocabulary/work_states.csv: Success, Failure, TimeOut, Cancelled).
    """
    yield from unless_skipped(
        ledger, COMMAND_STATUSES.name, lambda: _statuses(client, ledger, opts)
    )


def _statuses(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    state = kept_state()
    new_requests = ledger.commands.new_requests()
    requests = set(state.get(OPEN_REQUESTS, [])) | new_requests
    # Which statuses moved since the last run: the newest `updated_at` it read (data, not the
    # API's clock, which may run ahead of its data) minus the lag.
    moved = _activity(COMMAND_STATUSES, ledger, opts)
    newest: datetime | None = None
    limit, key = COMMAND_STATUSES.limit(opts.page_size), COMMAND_STATUSES.key

    def fetch(batch: list[str]) -> Any:
        return read_all(
            client,
            COMMAND_STATUSES.path_for(client),
            {"request": ",".join(batch)},
            limit=limit,
            key=key,
            paginator=COMMAND_STATUSES.paginator,
        )

    open_requests = {r for r in requests if r in new_requests}  # no statuses yet: retry once
    closed: set[str] = set()
    for _batch, read in fan_out(client, batches(sorted(requests), opts.status_batch_size), fetch):
        ledger.scans.add("command_statuses", read.count, read.items, key)
        for item in read.items:
            (closed if is_terminal("command", item.get("state")) else open_requests).add(
                item.get("request")
            )
            ts = COMMAND_STATUSES.cursor_time(item)
            newest = max(filter(None, (newest, ts)), default=None)
            if moved(item):
                ledger.feeds.active([url_id(item.get("device"))])
        if read.items:
            yield COMMAND_STATUSES.page(read.items, ledger)
    state[OPEN_REQUESTS] = sorted(r for r in open_requests if r)
    advance_watermark(STATUSES_SEEN, newest)


@dlt.resource(**OPERATIONS.hints())
def operations(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """`ordering=-updated_at`: stop at watermark - lag."""
    yield from unless_skipped(ledger, OPERATIONS.name, lambda: _operations(client, ledger, opts))


def _operations(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    ordering = {"ordering": f"-{OPERATIONS.cursor_field}"}
    for table, fresh in _desc_list(OPERATIONS, client, ledger, opts, ordering):
        ledger.commands.operations_listed({i["id"]: i.get("state") for i in fresh})
        yield table


@dlt.resource(**OPERATION_DEVICES.hints())
def operation_devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Per-device rows of operations new in this run or not yet terminal."""
    yield from unless_skipped(
        ledger, OPERATION_DEVICES.name, lambda: _operation_devices(client, ledger, opts)
    )


def _operation_devices(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    state = kept_state()
    previously_open = set(state.get(OPEN_OPERATIONS, []))
    changed = ledger.commands.changed_operations()
    moved = _activity(OPERATION_DEVICES, ledger, opts)
    newest: datetime | None = None
    key, limit = OPERATION_DEVICES.key, OPERATION_DEVICES.limit(opts.page_size)

    # A 404 for an operation this run listed (`changed`: `_desc_list` noted it) is a refused
    # part; for one only kept open by an earlier run, it closes it once the list read again
    # leaves it out (`refused_part`).
    def fetch(operation_id: str) -> Any:
        try:
            path = OPERATION_DEVICES.path_for(client, operation_id)
            return read_all(client, path, limit=limit, paginator=OPERATION_DEVICES.paginator)
        except EsperError as error:
            if refused_part(
                ledger, client, OPERATION_DEVICES.name, OPERATIONS, operation_id, error, retry=None
            ):
                return REFUSED
            return None

    rows: list[dict] = []
    gone: set[str] = set()
    refused: set[str] = set()  # asked again next run: kept open
    others: list[OtherParent] = []
    for operation_id, read in fan_out(client, sorted(previously_open | set(changed)), fetch):
        if read is REFUSED:
            refused.add(operation_id)
            continue
        if read is None:
            gone.add(operation_id)
            continue
        items = of_parent(read.items, "operation_id", operation_id)  # the operation asked
        if isinstance(items, OtherParent):
            others.append(items)
            refused.add(operation_id)
            continue
        ledger.scans.add("operation_devices", read.count, items, key)
        for item in items:
            ts = OPERATION_DEVICES.cursor_time(item)
            newest = max(filter(None, (newest, ts)), default=None)
            if moved(item):
                ledger.feeds.active([item.get("device_id")])
        rows.extend(items)
        if len(rows) >= ROWS_PER_BATCH:
            yield OPERATION_DEVICES.page(rows, ledger)
            rows = []
    if rows:
        yield OPERATION_DEVICES.page(rows, ledger)
    refuse_other_parents(ledger, OPERATION_DEVICES, OPERATIONS, "operation_id", others)
    still_open = {o for o, s in changed.items() if not is_terminal("operation", s)}
    state[OPEN_OPERATIONS] = sorted((previously_open - set(changed) - gone) | still_open | refused)
    advance_watermark(OPERATION_DEVICES_SEEN, newest)
