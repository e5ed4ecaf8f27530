"""Reference lists: groups, blueprints (and versions), tenant apps, Android applications."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import UTC
from typing import Any

import dlt
import pyarrow as pa

from .common import (
    Options,
    cursor_state,
    endpoint_path,
    hints_of,
    page_limit,
    page_table,
    skip_unavailable,
)
from .http import EsperClient, EsperResponseError
from .ledger import RunLedger
from .scan import fan_out, read_all, read_all_or_gone
from .settings import ENDPOINTS

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


@dlt.resource(**hints_of("groups"))
def groups(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Device groups: a small list, replaced each run."""
    yield from _whole_list("groups", client, ledger, opts)


@dlt.resource(**hints_of("blueprints"))
def blueprints(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Blueprints (their latest version each): merged each run."""
    yield from _whole_list("blueprints", client, ledger, opts)


@dlt.transformer(**hints_of("blueprint_versions"))
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


@dlt.resource(**hints_of("tenant_apps"))
def tenant_apps(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Tenant apps (Apple, Windows): merged each run."""
    yield from _whole_list("tenant_apps", client, ledger, opts)


@dlt.transformer(**hints_of("tenant_app_versions"))
def tenant_app_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every tenant app."""
    ids = page.column("id").to_pylist()
    yield from _versions("tenant_app_versions", ids, client, ledger, opts, "app_id")


@dlt.resource(**hints_of("applications"))
def applications(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """The Android app catalogue, read whole from the v1 list each run.

    The legacy `/enterprise/{eid}/application/` list misses apps (424 against 752 on v1, live
    §11) and its item routes 404 for ids v1 serves. v1 items carry no `updated_on` and the spec
    documents no filter for them, so the list is read whole (about 3 pages of 250).
    """
    yield from _whole_list("applications", client, ledger, opts)


@dlt.transformer(**hints_of("application_versions"))
def application_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every application whose latest version changed since the last run.

    A v1 application item names its `latest_version`, so a new version changes it: an incremental
    run re-reads only the version lists of applications whose `latest_version.id` differs from the
    last run's (and of applications not seen before); a full scan reads every list.
    """
    state = cursor_state()
    heads = dict(zip(_col_arrow(page, "id"), _col_arrow(page, "latest_version__id"), strict=True))
    known = {} if ledger.full_scan else state.get("application_heads", {})
    changed = [a for a, head in heads.items() if head is None or known.get(a) != head]
    ledger.application_ids.update(heads)
    yield from _versions("application_versions", changed, client, ledger, opts, "application_id")
    state["application_heads"] = heads  # the list is read whole: apps missing from it are gone


# -------------------------------------------------------------------------------- reports


@dlt.resource(**hints_of("status_metrics"))
def status_metrics(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """The tenant's status counters as of this run: one row per day of the API's clock.

    The route answers one bare object of counters (live route 23), no list. The row is keyed by
    the UTC date of the run's API time (`ledger.as_of`), so a second run the same day replaces
    that day's row and the next day's run adds one: a daily snapshot.
    """
    path = endpoint_path("status_metrics", client)
    body = None
    with skip_unavailable(ledger, "status_metrics"):
        body = client.get(path)
    if body is None:
        return
    if not isinstance(body, dict):
        raise EsperResponseError(
            f"{path}: expected an object of counters, got {type(body).__name__}"
        )
    assert ledger.as_of is not None  # set by open_run, before any resource runs
    as_of = ledger.as_of.astimezone(UTC)
    row = {**body, "snapshot_date": as_of.date().isoformat(), "as_of": as_of.isoformat()}
    yield page_table("status_metrics", [row])


def _heads(page: pa.Table) -> list[str | None]:
    """Each blueprint's head, its current version id and `updated_at` (None: neither is served)."""
    versions = _col_arrow(page, "version_id") or [None] * page.num_rows
    updated = _col_arrow(page, "updated_at") or [None] * page.num_rows
    return [
        f"{v} {u.isoformat()}" if v and u else None for v, u in zip(versions, updated, strict=True)
    ]


def _col_arrow(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else []
