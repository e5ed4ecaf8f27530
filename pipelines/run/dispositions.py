"""How each resource writes: the resources selected, merge or append, the note of appends.

A table's first load appends instead of merging (nothing is there to merge with); later parts of a
first load in parts append where the first part began to; a run notes the tables it appends into
until its load has completed, so the next run can keep one row per key after a kill.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dlt
import orjson
from dlt.common.schema.utils import has_table_seen_data
from esper_warehouse.sources.esper.http import EsperConfigError
from esper_warehouse.sources.esper.tables import TABLES

from ..warehouse import working_dir
from .reconcile import EVERY_APPENDED_TABLE
from .types import RunSettings

# Resources that come with another (`Table.loaded_with`): selecting `devices` loads its
# history and census too.
COMPANIONS: dict[str, tuple[str, ...]] = {
    parent: tuple(t for t, e in TABLES.items() if e.loaded_with == parent)
    for parent in sorted({e.loaded_with for e in TABLES.values() if e.loaded_with})
}
# What a selected table reads its ids from in the same run (`Table.needs`; a companion: the table
# it is loaded with).
NEEDS: dict[str, tuple[str, ...]] = {
    t: (*e.needs, *([e.loaded_with] if e.loaded_with else []))
    for t, e in TABLES.items()
    if e.needs or e.loaded_with
}


def select(source: Any, names: Sequence[str] | None) -> Any:
    """Keep the named resources, the tables they read ids from (`NEEDS`) and the companions of
    both; unknown names are a configuration error."""
    if not names:
        return source
    available = set(source.resources)
    for name in names:
        if name not in available and name not in COMPANIONS and not name.startswith("data_tap__"):
            raise EsperConfigError(
                f"unknown resource {name!r}; choose from: {', '.join(sorted(available))}"
            )
    wanted = {*names, *(n for name in names for n in NEEDS.get(name, ()))}
    wanted |= {c for name in wanted for c in COMPANIONS.get(name, ())}
    return source.with_resources(*sorted(wanted & available))


def merge_where_needed(source: Any, pipeline: dlt.Pipeline) -> None:
    """Tables declared `insert-only` take dlt's default merge where the destination lacks it.

    Device events are declared `insert-only` (their `Table` declarations): inserted when new, never
    rewritten. Events are immutable. dlt's default merge (delete-insert) de-duplicates the whole
    load with a window over every column, which at fleet scale costs several times the memory of
    `insert-only` (a MERGE that inserts the ids not yet stored; figures in docs/decisions.md,
    "Device events load insert-only"). Ids are unique within a run: each device's feed is read
    once and de-duplicated. Destinations without `insert-only` merge by dlt's default instead.
    """
    if "insert-only" in (pipeline.destination.capabilities().supported_merge_strategies or []):
        return
    for resource in source.resources.values():
        endpoint = TABLES.get(resource.table_name)
        if endpoint is not None and endpoint.disposition == "insert-only":
            resource.apply_hints(write_disposition="merge")


def append_on_first_load(source: Any, pipeline: dlt.Pipeline) -> list[str]:
    """A merge table's first load is an append: there is nothing in it to merge with yet.

    dlt's merge copies the load into a staging table, deletes the matching rows and inserts them
    again, and the staging copy stays in the warehouse. Into an empty table that is twice the
    writes for nothing (figures in docs/decisions.md, "A merge table's first load is an
    append"). It relies on every merge resource yielding each key at most once per run (the
    reads de-duplicate by key; see `pages.read_all`, `devices`, `commands._desc_list`, the event
    feeds). scd2 tables (`device_apps`) keep their merge: it writes their validity columns. From
    the next run on, every table merges.

    Returns:
        The tables that will be appended.
    """
    schema = pipeline.default_schema if pipeline.default_schema_name else None
    appended = []
    for resource in source.selected_resources.values():
        disposition = resource.write_disposition
        if isinstance(disposition, dict):
            if disposition.get("strategy") == "scd2":
                continue
            disposition = disposition.get("disposition")
        if disposition != "merge":
            continue
        table = schema.tables.get(resource.table_name) if schema else None
        if table is None or not has_table_seen_data(table):
            resource.apply_hints(write_disposition="append")
            appended.append(resource.table_name)
    return appended


def append_into(source: Any, tables: Sequence[str]) -> None:
    """The resources that fill `tables` append (the later parts of a first load, `scan/walk.py`)."""
    for resource in source.selected_resources.values():
        if resource.table_name in tables and not _is_scd2(resource.write_disposition):
            resource.apply_hints(write_disposition="append")


def _is_scd2(disposition: Any) -> bool:
    return isinstance(disposition, dict) and disposition.get("strategy") == "scd2"


def appended_marker(settings: RunSettings) -> Path:
    """Where a run notes the tables it appends into, until its load has completed."""
    return working_dir(settings.warehouse.resolve()) / f"{settings.pipeline_name}.appended.json"


def read_appended(marker: Path) -> list[str]:
    try:
        return sorted(orjson.loads(marker.read_bytes()))
    except FileNotFoundError:
        return []
    except orjson.JSONDecodeError:  # written by a run killed mid-write: any table it may name
        return [EVERY_APPENDED_TABLE]


def note_appended(marker: Path, tables: Sequence[str]) -> None:
    """Record (atomically) that a load appends into `tables`, before anything is extracted.

    An append is not idempotent: a job DuckDB committed but dlt had not marked done when the run
    was killed is run again by the next run, which then inserts its rows twice. The next run
    finds this note and keeps one row per key in those tables (`remove_duplicate_keys`).
    """
    marker.parent.mkdir(parents=True, exist_ok=True)
    partial = marker.with_suffix(".tmp")
    partial.write_bytes(orjson.dumps(sorted({*read_appended(marker), *tables})))
    partial.replace(marker)
