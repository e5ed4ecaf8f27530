"""Reference lists: groups, blueprints (and versions), tenant apps, legacy applications."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa

from .client import EsperClient
from .common import (
    Options,
    advance_cursor,
    cursor_state,
    endpoint_path,
    hints,
    page_limit,
    page_table,
    read_from,
)
from .ledger import RunLedger
from .scan import fan_out, iso, parse_time, read_all, read_all_or_gone
from .settings import (
    ENDPOINTS,
)

log = logging.getLogger("esper_warehouse.source")

# ------------------------------------------------------------------- groups, blueprints, apps


def _whole_list(
    table: str, client: EsperClient, ledger: RunLedger, opts: Options, params: dict | None = None
) -> Iterator[pa.Table]:
    key = ENDPOINTS[table].key
    read = read_all(
        client,
        endpoint_path(table, client),
        params,
        limit=page_limit(table, opts),
        key=key,
        parallel=True,
    )
    ledger.add_scan(table, read.count, read.items, key)
    if read.items:
        yield page_table(table, read.items)


def _versions(
    table: str,
    parent_ids: Iterable[str],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    parent_column: str | None = None,
    params: dict[str, dict] | None = None,
) -> Iterator[pa.Table]:
    """Each parent's complete list of versions, fetched concurrently; None for parents gone."""
    key, limit = ENDPOINTS[table].key, page_limit(table, opts)

    def fetch(parent: str) -> Any:
        return read_all_or_gone(
            client,
            endpoint_path(table, client, parent),
            (params or {}).get(parent),
            limit=limit,
            key=key,
        )

    rows: list[dict] = []
    for parent, read in fan_out(client, parent_ids, fetch):
        if read is None:  # the parent was deleted meanwhile
            ledger.application_ids.discard(parent)  # (only application ids are remembered)
            continue
        items = [{**i, parent_column: parent} for i in read.items] if parent_column else read.items
        ledger.add_scan(table, read.count, items, key)
        rows.extend(items)
    if rows:
        yield page_table(table, rows)


@dlt.resource(name="groups", primary_key="id", write_disposition="replace", columns=hints("groups"))
def groups(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Device groups: a small list, replaced each run."""
    yield from _whole_list("groups", client, ledger, opts)


@dlt.resource(
    name="blueprints", primary_key="id", write_disposition="merge", columns=hints("blueprints")
)
def blueprints(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Blueprints (their latest version each): merged each run."""
    yield from _whole_list("blueprints", client, ledger, opts)


@dlt.transformer(
    name="blueprint_versions",
    primary_key="version_id",
    write_disposition="merge",
    columns=hints("blueprint_versions"),
)
def blueprint_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every blueprint whose record changed since the last run.

    A blueprint record is its latest version (`version_id`, `version_number`, `updated_at`), so
    a new version changes it: on an incremental run only blueprints whose (`version_id`,
    `updated_at`) differ from the last run's have their version list read again. A full scan
    (weekly by default) reads every list.
    """
    state = cursor_state()
    heads = dict(zip(_col_arrow(page, "id"), _heads(page), strict=True))
    known = {} if ledger.full_scan else state.get("blueprint_heads", {})
    changed = [b for b, head in heads.items() if head is None or known.get(b) != head]
    yield from _versions("blueprint_versions", changed, client, ledger, opts)
    state["blueprint_heads"] = {**known, **heads}


@dlt.resource(
    name="tenant_apps", primary_key="id", write_disposition="merge", columns=hints("tenant_apps")
)
def tenant_apps(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Tenant apps (Apple, Windows): merged each run."""
    yield from _whole_list("tenant_apps", client, ledger, opts)


@dlt.transformer(
    name="tenant_app_versions",
    primary_key="id",
    write_disposition="merge",
    columns=hints("tenant_app_versions"),
)
def tenant_app_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every tenant app."""
    ids = page.column("id").to_pylist()
    yield from _versions("tenant_app_versions", ids, client, ledger, opts, "app_id")


@dlt.resource(
    name="applications", primary_key="id", write_disposition="merge", columns=hints("applications")
)
def applications(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Legacy (Android) applications updated since watermark - lag (all on a full scan)."""
    since = read_from("applications", opts.lag, ledger)
    params = {"updated_on_gt": iso(since)} if since else None
    key = ("id",)
    read = read_all(
        client,
        endpoint_path("applications", client),
        params,
        limit=page_limit("applications", opts),
        key=key,
        parallel=True,
    )
    ledger.add_scan("applications", read.count, read.items, key)
    ledger.application_ids.update(i["id"] for i in read.items)
    if read.items:
        yield page_table("applications", read.items)
    advance_cursor(
        "applications",
        max(filter(None, map(parse_time, _col(read.items, "updated_on"))), default=None),
    )


@dlt.resource(
    name="application_versions",
    primary_key="id",
    write_disposition="merge",
    columns=hints("application_versions"),
)
def application_versions(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Versions of every known legacy application, updated since watermark - lag."""
    state = cursor_state()
    known = set(state.get("application_ids", []))
    since = read_from("application_versions", opts.lag, ledger)
    apps = known | ledger.application_ids
    ledger.application_ids = set(apps)
    # Applications not seen before are read whole; known ones only since the watermark.
    params = {a: {"updated_on_gt": iso(since)} for a in known} if since else {}
    newest: datetime | None = None
    for table in _versions(
        "application_versions", sorted(apps), client, ledger, opts, "application_id", params
    ):
        newest = max(
            filter(None, (newest, *map(parse_time, _col_arrow(table, "updated_on")))), default=None
        )
        yield table
    state["application_ids"] = sorted(ledger.application_ids)
    advance_cursor("application_versions", newest)


def _heads(page: pa.Table) -> list[str | None]:
    """Each blueprint's head, its current version id and `updated_at` (None: neither is served)."""
    versions = _col_arrow(page, "version_id") or [None] * page.num_rows
    updated = _col_arrow(page, "updated_at") or [None] * page.num_rows
    return [
        f"{v} {u.isoformat()}" if v and u else None for v, u in zip(versions, updated, strict=True)
    ]


def _col(items: list[dict], name: str) -> list[Any]:
    return [i.get(name) for i in items]


def _col_arrow(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else []
