"""Shared by the tables' resources: the run's options, and what a refused route or device means.

A table whose tenant-level route is refused (a scope, a plan feature) is skipped and named, and
so are the tables read from it (`skip_unavailable`, `unless_skipped`); a device or a record
whose route refuses it is skipped and counted, and asked again by the next run
(`refused_part`). None of them ends the night.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from .arrow import shown
from .http import (
    EsperAuthError,
    EsperClient,
    EsperError,
    EsperNotFoundError,
    EsperUnavailableError,
)
from .http.pages import fan_out, read_all
from .run.ledger import RunLedger
from .run.refusals import RetryNote
from .table import Table, keep_what_was_loaded

log = logging.getLogger("esper_warehouse.source")

T = TypeVar("T")

ROWS_PER_BATCH = 20_000  # fan-out rows gathered into one Arrow table before it goes to dlt


@dataclass(frozen=True)
class Options:
    """The settings the resources read (see `settings.py` for their defaults)."""

    lag: timedelta
    status_batch_size: int
    heartbeat_start: timedelta
    page_size: int | None = None  # None: each endpoint's own (the largest the route allows)


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
        table = table or error.table
        ledger.refusals.mark_unavailable(table, error)
        # the tables read from it (`tables.DEPENDENTS`, which `open_run` gives the refusals:
        # the tables' modules import this one)
        ledger.refusals.skip_dependents(table)
        keep_what_was_loaded()


def unless_skipped(ledger: RunLedger, table: str, rows: Callable[[], Iterator[T]]) -> Iterator[T]:
    """`rows()`, unless `table` is already skipped in this run (a table it is read from was
    refused); a refusal of its own route skips it (and its dependents) too (`skip_unavailable`).

    A core list is a table like the others: once devices and groups have proven the key and
    the enterprise id, a 403/404 on any other tenant-level list skips that table for the run.
    """
    if ledger.refusals.is_skipped(table):
        keep_what_was_loaded()
        return
    with skip_unavailable(ledger, table):
        yield from rows()


REFUSED = object()  # what a fan-out's fetch returns for a refused part (counted in the ledger)

# What a refused part means, by status (`{noun}`: a device, a blueprint, a role, ...).
PART_REFUSALS = {
    400: "the route does not serve this {noun}",
    403: "refused for this {noun}: a scope or plan feature",
    404: "not served for this {noun}, which this run lists: a plan, platform or API version",
}


def refused_part(
    ledger: RunLedger,
    client: EsperClient,
    table: str,
    parent: Table,
    part: str,
    error: EsperError,
    *,
    retry: RetryNote | None = True,
) -> bool:
    """What an error on one parent's route means: True, a refused part (skipped and counted);
    False, the parent is gone (a 404, and the parent is no longer in its list).

    A 400/403/404 on a per-device or per-id route is a refusal: nothing of that part is loaded,
    the run ends partial and names it, and the part is asked again (`retry`: see
    `Refusals.skip_part`). Only a 404 whose parent is gone twice is not one: nothing else in
    this run holds the parent as current (`RunLedger.holds`: a device this run listed), and its
    list, read again after the 404, leaves it out. A record that leaves its list for a moment
    is kept and asked again, never retired. Any other error is the run's: raised again.
    """
    status = error.status
    tenant_level = isinstance(error, EsperNotFoundError) and error.tenant_level
    if error.route is None or status not in PART_REFUSALS or tenant_level:
        raise error
    if isinstance(error, EsperAuthError):
        raise error
    gone = (
        status == 404
        and not ledger.holds(parent.name, str(part))
        and not still_listed(ledger, client, parent, part)
    )
    if gone:
        ledger.refusals.part_done(table, part)
        return False
    noun = parent.name.removesuffix("s").replace("_", " ")  # a device, a blueprint, a role
    meaning = PART_REFUSALS[status].format(noun=noun)
    if status == 400 and parent.name == "devices":
        meaning += ": the legacy routes are Android only"
    ledger.refusals.skip_part(table, part, error, meaning, noun=noun, retry=retry)
    return True


@dataclass(frozen=True)
class OtherParent:
    """A part whose items name another parent than the one the request asked for."""

    part: str
    value: object
    column: str | None = None  # the field naming it, when not the column the caller checks


def of_parent(
    items: list[dict],
    column: str,
    part: str,
    named: Callable[[dict], Iterable[object]] | None = None,
) -> list[dict] | OtherParent:
    """A per-parent list's items, each with `column` = `part`, the parent the request named.

    The parent is the one asked, never the id an item repeats: an item without it belongs to
    `part` all the same; an item naming another parent makes the whole part suspect (which of
    the two is it?): `OtherParent`, refused by the caller (`refuse_other_parents`). `named`:
    the ids an item repeats of its parent, where it is not only `column` (a link, a nested id).
    """
    for item in items:
        for value in named(item) if named is not None else (item.get(column),):
            if value is not None and value != "" and str(value) != str(part):
                return OtherParent(part, value, column)
    return [{**item, column: part} for item in items]


def refuse_other_parents(
    ledger: RunLedger,
    table: Table,
    parent: Table,
    column: str,
    others: list[OtherParent],
    route: str | None = None,
) -> None:
    """Name the parts of `table` left out because their items named another parent (`of_parent`),
    read from `route` (default: the table's): the run ends partial, and the part is read again
    by the next run as for any refused part."""
    if not others:
        return
    noun = parent.name.removesuffix("s").replace("_", " ")
    first = others[0]
    ledger.refusals.mark_skipped(
        table.name,
        f"{len(others)} {noun}(s) left out: GET {route or table.path} served items whose "
        f"{first.column or column} names "
        f"another {noun} than the one asked (e.g. {shown(first.value)} for {shown(first.part)}); "
        "read again next run",
    )


@dataclass
class ParentLists:
    """One per-parent read: its rows (each with the parent asked), and the parents refused."""

    rows: list[dict] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class PerParent:
    """A list read once per parent: `table`'s rows, with the parent asked in `column`. `route`:
    the lists' route when it is not `table.path` (a list read per item of a per-parent list)."""

    table: Table
    parent: Table
    column: str
    route: str | None = None


# A parent's rows -> the lists they name, read next: list id -> its route.
Named = Callable[[list[dict]], dict[str, str]]


def read_each_parent(
    first: PerParent,
    paths: dict[str, str],
    then: Sequence[tuple[PerParent, Named]],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
) -> list[ParentLists]:
    """Each parent's whole list (`paths`: parent -> route), concurrently: the rows of `first`'s
    table, with the parent asked in its column (an item naming another parent refuses its
    part: `of_parent`); and for each level of `then`, the lists a parent's rows name (`Named`),
    read as soon as that parent's list is: a chain of per-parent lists waits for its slowest
    path, where wave after wave it waited for each wave's slowest request (under weather, a
    refused one's `Retry-After`). A list two parents name is read once. One `ParentLists` per
    level, `first`'s first.

    The parents are records this run read: from a tenant-level list, which noted them
    (`note_listed`), or from a per-parent list (a 404 under them is then always a refused part:
    `still_listed`). An error is `refused_part`'s: a 400/403/404 of a part is counted against
    its level's table, naming its route and status, and read again next run (the parents'
    tables are replaced, the runs' watermark held); a 401, a 5xx after retries or an unreadable
    answer ends the run.
    """
    claimed: list[set[str]] = [set() for _ in then]
    lock = threading.Lock()

    def named_by(rows: list[dict]) -> list[tuple[int, str, str]]:
        wanted = []
        for n, (_level, named) in enumerate(then):
            lists = named(rows)
            with lock:  # (parents' lists arrive on several threads)
                fresh = [(n, i, path) for i, path in lists.items() if i not in claimed[n]]
                claimed[n].update(i for _, i, _ in fresh)
            wanted.extend(fresh)
        return wanted

    def checked(level: PerParent, part: str, path: str) -> Any:
        items = _parent_list(level, path, part, client, ledger, opts)
        return items if items is REFUSED or items is None else of_parent(items, level.column, part)

    def fetch(part: str) -> tuple[Any, list]:
        rows = checked(first, part, paths[part])
        if not isinstance(rows, list) or not then:
            return rows, []
        wanted = named_by(rows)
        return rows, list(fan_out(client, wanted, lambda w: checked(then[w[0]][0], w[1], w[2])))

    reads = [_PartsRead(first), *(_PartsRead(level) for level, _ in then)]
    for part, (items, later) in fan_out(client, list(paths), fetch):
        reads[0].add(part, items)
        for (n, list_id, _path), got in later:
            reads[n + 1].add(list_id, got)
    return [read.done(ledger) for read in reads]


def _parent_list(
    level: PerParent, path: str, part: str, client: EsperClient, ledger: RunLedger, opts: Options
) -> Any:
    """One parent's whole list (items known by `id`); REFUSED (counted), or None (the parent is
    gone): `refused_part`."""
    table = level.table
    try:
        return read_all(
            client, path, limit=table.limit(opts.page_size), paginator=table.paginator
        ).items
    except EsperError as error:
        refused = refused_part(ledger, client, table.name, level.parent, part, error, retry=None)
        return REFUSED if refused else None


class _PartsRead:
    """One level's parts as they arrive: rows with the parent asked, refused parts, and parts
    whose items named another parent (refused too, named once the level is read)."""

    def __init__(self, level: PerParent) -> None:
        self.level, self.read = level, ParentLists()
        self.others: list[OtherParent] = []

    def add(self, part: str, rows: Any) -> None:
        """A part's rows as `of_parent` checked them, REFUSED, or None (the parent is gone)."""
        if rows is REFUSED:
            self.read.refused.add(part)
        elif isinstance(rows, OtherParent):
            self.others.append(rows)
            self.read.refused.add(part)
        elif rows is not None:
            self.read.rows.extend(rows)

    def done(self, ledger: RunLedger) -> ParentLists:
        level = self.level
        refuse_other_parents(
            ledger, level.table, level.parent, level.column, self.others, level.route
        )
        return self.read


def side_by_side(client: EsperClient, *reads: Callable[[], T]) -> list[T]:
    """`reads` at the same time, on the client's worker threads; their results in their order.

    For reads of one list that do not read each other (a stage's operation lists and its target
    lists): one after the other, each of their waves waits for its slowest request (a refused
    one for its `Retry-After`), and the second for the first. The first error is raised.
    """
    done = dict(fan_out(client, range(len(reads)), lambda n: reads[n]()))
    return [done[n] for n in range(len(reads))]


def parent_paths(table: Table, parents: list[str], client: EsperClient) -> dict[str, str]:
    """Each parent's route of a per-parent `table`."""
    return {parent: table.path_for(client, parent) for parent in parents}


def items_by_id(
    items: list[dict], ledger: RunLedger, table: Table, column: str, route: str
) -> dict[str, list[dict]]:
    """Lists read next, by their `id` (a list two parents share is read once, its items kept
    for each, e.g. a stage plan's); a list without an id is set aside, naming the
    `table.column` (`column` of `table`) that would hold it, never read as a `KeyError`."""
    missing = [item for item in items if item.get("id") in (None, "")]
    if missing:
        ledger.set_aside(table.name, column, route, missing, kept=table.disposition == "replace")
    lists: dict[str, list[dict]] = {}
    for item in items:
        if item.get("id") not in (None, ""):
            lists.setdefault(item["id"], []).append(item)
    return lists


def keep_if_refused(ledger: RunLedger, table: Table, refused: set[str]) -> bool:
    """A replaced table with refused parts is kept whole as loaded (True): replacing it would
    drop the refused parts' rows. Named in the run, with the parts counted (`skip_part`)."""
    if not refused or table.disposition != "replace":
        return False
    ledger.refusals.mark_skipped(
        table.name, "kept as loaded, as some of its parts were refused", kept=True
    )
    keep_what_was_loaded()
    return True


def note_listed(ledger: RunLedger, table: Table, items: Iterable[dict]) -> None:
    """Note the records this run read from `table`'s list, by their key's first column (the id
    their routes name): `RunLedger.listed`, so that a 404 on one of their routes is a refused
    part, never a record gone (`refused_part`), whatever the list read again says.

    Called where a list is read, once: the whole lists (`tables/catalogues.py`'s `read_list`,
    under `whole_list` and `shared_list`) and the lists read newest first
    (`tables/commands.py`'s `_desc_list`: the operations read this run). The records of a
    per-parent list are not noted: a 404 under them is always a refused part (`still_listed`).
    """
    if not table.key:
        return
    first = table.key[0]
    ledger.listed.add(
        table.name, (item[first] for item in items if item.get(first) not in ("", None))
    )


def still_listed(ledger: RunLedger, client: EsperClient, parent: Table, part: str) -> bool:
    """Whether `part` is in its parent's list read again now (once per run, after a 404).

    The list read before the 404 named the part, so only a read after it can prove the part
    gone. A list that cannot be read proves nothing: the part counts as still listed, and so
    does the part of a per-parent list (`{id}` in its route: no one list holds them all).
    """
    if "{id}" in parent.path:
        return True

    def read() -> set[str]:
        log.info(
            "%s: read again, to tell a removed %s from a refused route", parent.path, parent.name
        )
        first = parent.key[0]
        read = read_all(
            client,
            parent.path_for(client),
            limit=parent.limit(None),
            key=parent.key,
            keep=lambda item: item.get(first),  # a fleet's whole records would be ~0.5 GB
            paginator=parent.paginator,
        )
        return {str(value) for value in read.items}

    try:
        listed = ledger.shared.read_once(f"{parent.name} (listed again)", read)
    except EsperError as error:
        log.info("%s: not read again (%s): its parts count as refused", parent.path, error)
        return True
    return str(part) in listed
