"""What the source keeps in dlt state between runs: every key, named once, and how a watermark
moves: where an incremental read starts (`read_from`), where it stops (`EarlyStop`, on a list
served newest first) and what it leaves for the next run (`advance_watermark`).

A watermark is the newest value read of a record field (`Table.cursor`; dlt calls it an
incremental cursor); a page cursor is the API's token for the next page
(`http/paginators.py`), never kept between runs.

Everything lives in the source state's `cursors` dict (`kept_state`), written only after a
resource has yielded everything it read, so a run that fails part-way leaves it where it was
(dlt commits state together with the load package). Watermarks are keyed by table name
(`devices`, `command_requests`, ...); the other keys are below. Per-device event watermarks are
read from the warehouse instead (`tables/events.py`), and a Data Tap query's watermark (the
newest value of its `cursor` column) is its resource's own state (`tables/data_tap.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import dlt

from ..times import cursor_time, iso, parse_time
from .ledger import RunLedger

log = logging.getLogger("esper_warehouse.source")


class Paged(Protocol):
    """A page of a list as the early stop reads it: its items (`http/pages.py`'s `Page`)."""

    items: list[dict]


P = TypeVar("P", bound=Paged)

CURSORS = "cursors"
# When the last complete device list was read (the weekly full scan's clock), and the last
# incremental devices read.
DEVICES_FULL_SCAN_AT = "devices_full_scan_at"
DEVICES_INCREMENTAL_AT = "devices_incremental_at"
# The API time of a first load's first committed part (written by every part until the first
# load completes): a run that resumes it treats what happened since as activity.
FIRST_LOAD_STARTED = "first_load_started_at"
# Cursors taken from the data: the newest `updated_at` read, not the API's clock, which can run
# ahead of the data.
STATUSES_SEEN = "command_statuses_updated_at"
OPERATION_DEVICES_SEEN = "operation_devices_updated_at"
# The newest heartbeat `timestamp` read.
HEARTBEATS_SEEN = "heartbeats_timestamp"
# Command requests and operations not yet finished: their statuses / devices are read again.
OPEN_REQUESTS = "open_requests"
OPEN_OPERATIONS = "open_operations"
# The newest `updated_at` of the pipeline runs last read: a run ended before it is not read again.
PIPELINE_RUNS_SEEN = "pipeline_runs_updated_at"
# Each blueprint's and application's head version last read: unchanged heads skip their lists.
BLUEPRINT_HEADS = "blueprint_heads"
APPLICATION_HEADS = "application_heads"
# The parts of per-device tables the API refused (`Refusals.skip_part`), asked again by the
# next run until they answer: {table: {device id: what asking again needs}}. Tables read whole
# each run (a replaced table, versions behind a head that did not move) need no entry.
REFUSED_PARTS = "refused_parts"
# Wall-clock times of the Data Tap requests of the last hour, as warehouses made before the
# request log (`tables/data_tap_jobs.py`, `RequestBudget`) kept them at the root of the source state:
# read once into that log and removed.
DATA_TAP_REQUESTS = "data_tap_requests"


def kept_state() -> dict[str, Any]:
    """What the source keeps between runs, the source state's `cursors` dict (named so in the
    warehouses that hold it): every key below lives in it."""
    return dlt.current.source_state().setdefault(CURSORS, {})  # type: ignore[no-any-return]


def read_from(
    name: str, lag: timedelta, ledger: RunLedger, *, also_full: bool = False
) -> datetime | None:
    """Where an incremental read starts: the stored watermark minus the lag; None = everything.

    `also_full`: the watermark holds on a full scan too (a watermark that says which rows moved,
    not how much to read: command-status and operation-device activity).
    """
    mark = kept_state().get(name)
    plan = ledger.plan
    if also_full and not mark and plan.resumed_from is not None:
        # a resumed first load: everything since its first part committed is activity
        return plan.resumed_from - lag
    if (plan.full_scan and not also_full) or not mark:
        return None
    return parse_time(mark) - lag  # type: ignore[operator]


def loaded_since(table: str, cursor: str, since: datetime | None) -> dict[str, datetime | None]:
    """Id -> `cursor` of `table`'s rows the warehouse holds with `cursor` at or after `since`.

    What a read that starts at the watermark less the lag lists again: a record listed at the
    version the warehouse holds was news to the run that loaded it, and its fan-outs (apps, the
    feed) were read then; counted as news again, each lag window repeated them on every night.
    Empty when unknown (no `since`, no pipeline, no table yet): every record is news, which costs
    requests, never rows.
    """
    if since is None:
        return {}
    try:
        pipeline = dlt.current.pipeline()
        with pipeline.sql_client() as client:
            if not client.has_dataset():
                return {}
            name = client.make_qualified_table_name(table)
            rows = client.execute_sql(
                f"select id, {cursor} from {name} where {cursor} >= %s", since
            )
    except Exception as error:  # no table yet: every record is news
        log.info("%s: no versions in the warehouse (%s)", table, type(error).__name__)
        return {}
    return {str(i): parse_time(c) for i, c in rows or []}


def loaded_versions(
    ledger: RunLedger, table: str, cursor: str, since: datetime | None
) -> dict[str, datetime | None]:
    """`loaded_since`, read once per run: the source function reads it (`esper._opened`), in
    the thread that builds the source, as a resource's worker thread cannot open the
    destination; the resources read it from there."""
    return ledger.shared.read_once(
        f"{table} loaded since {since}", lambda: loaded_since(table, cursor, since)
    )


def is_loaded(loaded: Mapping[str, datetime | None], item_id: object, version: object) -> bool:
    """Whether the warehouse holds this version of the record (`loaded_since`)."""
    key = str(item_id)
    return key in loaded and loaded[key] == parse_time(version)


def advance_watermark(name: str, newest: datetime | None) -> None:
    """Move a watermark forward (never back) once everything up to it has been yielded."""
    if newest is None:
        return
    state = kept_state()
    old = parse_time(state.get(name))
    if old is None or newest > old:
        state[name] = iso(newest)


def bind_retries(ledger: RunLedger) -> None:
    """Let the run's refusals keep the parts to ask again in this run's state (`REFUSED_PARTS`).

    Called by a resource (the source function's state is read-only): the dict is the one dlt
    commits with the run's data, so the fan-outs' worker threads write into it through the
    lock of `RunLedger.refusals`, and a run that fails commits nothing of it.
    """
    ledger.refusals.keep_retries_in(kept_state().setdefault(REFUSED_PARTS, {}))


@dataclass
class EarlyStop:
    """Early stop on a list served newest first, only while the order really is newest first.

    Items older than `stop_at` (the watermark less the lag) are dropped. Paging stops at the
    first page that reaches below `stop_at`, provided every watermark value seen so far ran in
    non-increasing order; once the order is seen broken, the whole list is read and filtered
    instead. `newest` is the watermark to leave for the next run.

    Attributes:
        fields: the record field the watermark follows (`Table.cursor`), or several, the first
            an item has read.
    """

    fields: str | tuple[str, ...]
    stop_at: datetime | None
    ordered: bool = True
    stopped: bool = False
    newest: datetime | None = None
    _last: datetime | None = field(default=None, repr=False)

    def value(self, item: Mapping[str, Any]) -> datetime | None:
        names = (self.fields,) if isinstance(self.fields, str) else self.fields
        name = next((n for n in names if item.get(n)), None)
        return None if name is None else cursor_time(item[name], name)

    def keep(self, items: list[dict]) -> list[dict]:
        """The items of one page at or after `stop_at`; decides whether to stop after it."""
        kept = []
        reached_old = False
        for item in items:
            ts = self.value(item)
            if ts is not None:
                if self._last is not None and ts > self._last:
                    if self.ordered:
                        log.info(
                            "%s order is not newest first: reading the whole list", self.fields
                        )
                    self.ordered = False
                self._last = ts
                if self.newest is None or ts > self.newest:
                    self.newest = ts
            if self.stop_at is not None and ts is not None and ts < self.stop_at:
                reached_old = True
                continue
            kept.append(item)
        if reached_old and self.ordered:
            self.stopped = True
        return kept

    def pages(self, pages: Iterable[P]) -> Iterator[tuple[P, list[dict]]]:
        """Walk pages, yielding each with its kept items, until the early stop applies."""
        for page in pages:
            yield page, self.keep(page.items)
            if self.stopped:
                return
