"""Every raw table of the source: one `Table` declaration per table, beside its resource (the
device tables' resources but heartbeats are the devices scan's: `scan/devices.py`).

One module per part of the tenant (`MODULES`, each with its `TABLES`; its docstring says what it
holds). Data Tap's tables are named by the user's queries and declared at run time (`data_tap`).

`TABLES` is the list every other part derives from (dlt hints, the empty raw tables of the SQL
build, Dagster's raw assets, `doctor`'s list probes, `run --resources` companions, the rows of
docs/reference/raw-tables.md and docs/spec/README.md: `pipelines/tools/table_docs.py`). To add a table:
docs/recipes/add-a-resource.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from graphlib import TopologicalSorter
from types import ModuleType

from dlt.extract.resource import DltResource

from ..table import Table
from . import (
    access,
    catalogues,
    commands,
    credentials,
    devices,
    events,
    pipelines,
    status_metrics,
)
from .catalogues import list_resource

MODULES = (devices, catalogues, commands, events, status_metrics, credentials, access, pipelines)
TABLES: dict[str, Table] = {table.name: table for module in MODULES for table in module.TABLES}


def _lists(module: ModuleType) -> tuple[DltResource, ...]:
    """A module's tenant-level reads, in its `TABLES` order: each whole list's resource made
    from its declaration (`Table.whole_list`), and the resources the module writes (`LISTS`)."""
    written = {resource.name: resource for resource in getattr(module, "LISTS", ())}
    for table in module.TABLES:
        if table.whole_list is not None:
            if table.name in written:
                raise ValueError(f"{table.name}: a whole list's resource is made, not written")
            written[table.name] = list_resource(table)
    ordered = [written.pop(table.name) for table in module.TABLES if table.name in written]
    return (*ordered, *written.values())


# The resources of tenant-level lists, with no parent and no order to keep beyond their
# module's: the source reads them all, in this order. A list read whole is a declaration's
# `whole_list`; another such read goes in its module's `LISTS`.
LISTS = tuple(read for module in MODULES for read in _lists(module))


# Families: the tables whose freshness is told as one (a line of `status`'s freshness block) and
# that a mart's clock rule reads together (sql/intermediate/int_family_freshness.sql). A table's
# family is its module's, unless its declaration names another (`Table.family`); Data Tap tables
# are each a family of their own (declared at run time).
FAMILY_LABELS = {
    "devices": "Devices",
    "census": "Device census (full scans)",
    "catalogues": "Catalogues",
    "commands": "Commands",
    "operations": "Operations",
    "events": "Event feeds",
    "status_metrics": "Status metrics",
    "credentials": "Credentials",
    "access": "Access",
    "pipelines": "Pipelines",
}
FAMILY: dict[str, str] = {
    table.name: table.family or module.__name__.rsplit(".", 1)[-1]
    for module in MODULES
    for table in module.TABLES
}


def read_from(table: Table) -> set[str]:
    """The tables whose items a table is read from (its ids, its parent list, its selection)."""
    return {*table.needs, *filter(None, (table.loaded_with, table.parent))}


def waits_for_tail(table: Table, present: Collection[str], walk: Collection[str]) -> bool:
    """Whether a table's resource starts once the whole tail has ended (`run.tail.Tail.after`):
    read off the devices walk, it declares it follows (`Table.after`) a table read in the tail."""
    return table.name not in walk and any(t in present and t not in walk for t in table.after)


def extraction_order(tables: Mapping[str, Table], walk: Collection[str]) -> list[str]:
    """The order in which dlt starts this run's resources (`fifo`), derived from the tables'
    declarations as dlt's `rest_api` derives its resources' (`graphlib`). A table comes after:

    - the tables it is read from (`read_from`: its parent, the ids it needs, the table it comes
      with);
    - the devices walk (`walk`: devices and the tables read per device page, its pipes), when it
      is not on it: dlt starts it once `devices` has ended;
    - off the walk, the tables it declares it follows (`Table.after`; a table read per device
      page reads every device's feed, needing no other table's activity); when one of them is
      read in the tail, every table of the tail (its resource waits for the tail to end, and
      sees only the resources already started: `run/tail.py`).

    Among the tables free to start, their declaration order (`tables`' order, `TABLES`').

    Raises:
        graphlib.CycleError: Declarations that follow each other round a circle.
    """
    tail = {n for n, t in tables.items() if n not in walk and not waits_for_tail(t, tables, walk)}
    graph: dict[str, set[str]] = {}
    for name, table in tables.items():
        before = read_from(table)
        if name not in walk:
            before |= {*walk, *table.after}
        if waits_for_tail(table, tables, walk):
            before |= tail
        graph[name] = {t for t in before if t in tables and t != name}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    rank = {name: i for i, name in enumerate(tables)}
    ready: list[tuple[int, str]] = []
    order: list[str] = []
    while sorter.is_active():
        for name in sorter.get_ready():
            heapq.heappush(ready, (rank[name], name))
        order.append(heapq.heappop(ready)[1])
        sorter.done(order[-1])
    return order


def _dependents(name: str) -> tuple[str, ...]:
    found: list[str] = []
    todo = [name]
    while todo:
        current = todo.pop()
        for table in TABLES.values():
            if current in read_from(table) and table.name not in found and table.name != name:
                found.append(table.name)
                todo.append(table.name)
    return tuple(found)


# table -> the tables read from it, directly or not: a run that skips a table skips them too
# (`common.skip_unavailable`), and `doctor` says so of a refused route.
DEPENDENTS: dict[str, tuple[str, ...]] = {name: _dependents(name) for name in TABLES}


def skipped_with(table: str) -> tuple[str, ...]:
    """The tables a run skips when `table`'s own route is refused: it and its dependents."""
    return (table, *DEPENDENTS.get(table, ()))


__all__ = [
    "DEPENDENTS",
    "FAMILY",
    "FAMILY_LABELS",
    "LISTS",
    "TABLES",
    "Table",
    "extraction_order",
    "read_from",
    "skipped_with",
]
