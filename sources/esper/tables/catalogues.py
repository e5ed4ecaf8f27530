"""The tenant's catalogues: groups, blueprints and their versions, tenant apps, the app catalogue."""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import dlt
import pyarrow as pa
from dlt.extract.resource import DltResource

from ..common import (
    REFUSED,
    Options,
    OtherParent,
    keep_if_refused,
    note_listed,
    of_parent,
    refuse_other_parents,
    refused_part,
    skip_unavailable,
    unless_skipped,
)
from ..http import EsperClient, EsperError
from ..http.pages import ListRead, fan_out, read_all
from ..run.ledger import RunLedger
from ..run.state import APPLICATION_HEADS, BLUEPRINT_HEADS, kept_state
from ..table import BOOL, INT, JSON, MAX_PAGE_SIZE, PAGE_SIZE, TS, Col, Doc, Table, cols, flat

log = logging.getLogger("esper_warehouse.source")

# `/v2/blueprints/` is read 20 at a time, as Esper's own support tool reads it (live-observations
# section 23): blueprints carry their whole settings tree.
BLUEPRINT_PAGE_SIZE = 20
_BLUEPRINT = (
    *cols("id name description comments version_id created_by updated_by"),
    *cols("version_number minor_version_number", INT),
    Col("publish", BOOL),
    Col("settings", JSON),
    *cols("created_at updated_at", TS),
)

GROUPS = Table(
    "groups",
    "/enterprise/{eid}/devicegroup/",
    ("id",),
    disposition="replace",
    columns=(
        *cols("id name parent path blueprint enterprise thumbnail"),
        *cols("device_count children_count", INT),
        Col("created_on", TS),
    ),
    doc=Doc(kept="replaced each run", envelope="legacy-list"),
    whole_list="core",
)
BLUEPRINTS = Table(
    "blueprints",
    "/v2/blueprints/",
    ("id",),
    page_size=BLUEPRINT_PAGE_SIZE,
    columns=_BLUEPRINT,
    doc=Doc(
        read=f"({BLUEPRINT_PAGE_SIZE} a page, as Esper's own tool reads it; other lists "
        f"{PAGE_SIZE}, devices {MAX_PAGE_SIZE})",
        kept="merged each run",
        envelope="content-list (previous)",
    ),
)
BLUEPRINT_VERSIONS = Table(
    "blueprint_versions",
    "/v2/blueprints/{id}/versions/",
    ("version_id",),
    loaded_with="blueprints",
    columns=_BLUEPRINT,
    doc=Doc(
        kept="version lists re-read for blueprints whose `version_id` or `updated_at` changed "
        "(all of them on a full scan), or whose list was refused last time",
        envelope="content-list (previous)",
    ),
)
TENANT_APPS = Table(
    "tenant_apps",
    "/v2/tenant-apps",
    ("id",),
    columns=(
        *cols("id platform tenant_id package_name created_by updated_by"),
        *cols("created_at updated_at", TS),
    ),
    doc=Doc(kept="merged each run", envelope="v2-list"),
)
TENANT_APP_VERSIONS = Table(
    "tenant_app_versions",
    "/v2/tenant-apps/{id}/versions",
    ("id",),
    loaded_with="tenant_apps",
    columns=(
        *cols("id app_id app_type tenant_id app_name app_icon_url release_notes"),
        *cols("description version_name build_number version_code min_sdk_version"),
        *cols("created_by updated_by"),
        Col("file_size_in_kb", INT),
        *cols("is_active", BOOL),
        Col("device_family", JSON),
        *cols("created_at updated_at", TS),
    ),
    doc=Doc(kept="merged each run, every tenant app's list", envelope="v2-list (`prev`)"),
)
APPLICATIONS = Table(
    "applications",
    "/v1/enterprise/{eid}/application/",
    ("id",),
    columns=(  # v1 items (live route 2); legacy-only fields stay declared, null
        *cols("id application_name package_name developer category compatibility"),
        *cols("content_rating enterprise"),
        *cols("is_active is_hidden", BOOL),
        *cols("versions latest_version", JSON),
        *flat("latest_version__id latest_version__version_code"),
        *flat("latest_version__build_number latest_version__release_name"),
        *cols("created_on updated_on", TS),
    ),
    doc=Doc(
        read="(the v1 catalogue; the legacy list misses apps: live, 424 against 752)",
        kept="the catalogue read whole each run",
        envelope="legacy-list; every app, items with `latest_version`",
    ),
)
APPLICATION_VERSIONS = Table(
    "application_versions",
    "/v1/enterprise/{eid}/application/{id}/version/",
    ("id",),
    columns=(
        *cols("id application_id version_code build_number hash_string min_sdk_version"),
        *cols("target_sdk_version download_url icon_url release_name release_comments"),
        *cols("application enterprise approval_status app_icon app_file"),
        *cols("installed_count size_in_mb", INT),
        *cols("is_enabled is_g_play is_default", BOOL),
        *cols("created_on updated_on release_date", TS),
    ),
    needs=("applications",),  # read per application of this run's list
    doc=Doc(
        kept="version lists re-read for applications whose `latest_version` changed (all on a "
        "full scan)",
        envelope="legacy-list",
    ),
)
GEOFENCES = Table(
    "geofences",
    "/v0/enterprise/{eid}/geofence/",
    ("id",),
    disposition="replace",
    columns=(  # live route 24
        *cols("id name description created_by enterprise radius_unit"),
        *cols("latitude longitude", "double"),
        *cols("radius device_count", INT),
        Col("device_actions", JSON),
        *cols("created_on updated_on", TS),
    ),
    doc=Doc(
        columns="`name`, `description`, `latitude`, `longitude` (degrees), `radius` with "
        "`radius_unit`, `device_actions` (what a device leaving it does), `device_count`",
        kept="replaced each run; a tenant without geofences (403/404) skips the table and keeps "
        "the last list (exit 6)",
        envelope="legacy-list (`count`, `next`, `previous`)",
    ),
    whole_list="own",
)
TABLES = (
    GROUPS, BLUEPRINTS, BLUEPRINT_VERSIONS, TENANT_APPS, TENANT_APP_VERSIONS, APPLICATIONS,
    APPLICATION_VERSIONS, GEOFENCES,
)  # fmt: skip

# ------------------------------------------------------------------- groups, blueprints, apps


def whole_list(
    table: Table, client: EsperClient, ledger: RunLedger, opts: Options, params: dict | None = None
) -> Iterator[pa.Table]:
    """A tenant-level list read to its end, reconciled with its count, in one Arrow table."""
    read = read_list(table, client, ledger, opts, params)
    ledger.scans.add(table.name, read.count, read.items, table.key)
    if read.items:
        yield table.page(read.items, ledger)


def read_list(
    table: Table, client: EsperClient, ledger: RunLedger, opts: Options, params: dict | None = None
) -> ListRead:
    """A tenant-level list read to its end (pages fetched together, `read_all`), its records
    noted as listed by this run (`common.note_listed`): the one read of `whole_list` and
    `shared_list`."""
    path, limit = table.path_for(client), table.limit(opts.page_size)
    read = read_all(client, path, params, limit=limit, key=table.key, parallel=True,
                    prefer=table.prefer_copy, paginator=table.paginator)  # fmt: skip
    note_listed(ledger, table, read.items)
    return read


def read_versions(
    table: Table,
    parent_table: Table,
    parent_ids: Iterable[str],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    parent_column: str | None = None,
) -> Generator[pa.Table, None, set[str]]:
    """Each parent's complete list of versions, fetched concurrently (`read_version_lists`) and
    loaded (`loaded_versions`); returns the parents whose list the API refused (the caller asks
    them again next run)."""
    lists = read_version_lists(table, parent_table, parent_ids, client, ledger, opts, parent_column)
    yield from loaded_versions(table, lists, ledger)
    return lists.refused


@dataclass(frozen=True)
class VersionLists:
    """One read of each parent's list of versions: the rows, the API's count of them, and the
    parents whose list it refused."""

    rows: list[dict]
    expected: int
    refused: set[str]


def read_version_lists(
    table: Table,
    parent_table: Table,
    parent_ids: Iterable[str],
    client: EsperClient,
    ledger: RunLedger,
    opts: Options,
    parent_column: str | None = None,
) -> VersionLists:
    """Each parent's complete list of versions, fetched concurrently; a refusal is counted
    against `table` (`common.refused_part`). `parent_column`: the column holding the parent
    asked (`common.of_parent`): a list whose items name another parent is refused too.

    The parents are records this run listed (`common.note_listed`): a 404 on one's versions is
    a refused part, kept and asked again, even when its list read again leaves it out. The read
    belongs to no table's load, so several tables may share it (`read_once`):
    `loaded_versions`, in the table's own resource, records the scan and loads it.
    """
    key, limit = table.key, table.limit(opts.page_size)

    def fetch(parent: str) -> Any:
        try:
            return read_all(
                client,
                table.path_for(client, parent),
                limit=limit,
                key=key,
                prefer=table.prefer_copy,
                paginator=table.paginator,
            )
        except EsperError as error:
            return (
                REFUSED
                if refused_part(ledger, client, table.name, parent_table, parent, error, retry=None)
                else None
            )

    rows: list[dict] = []
    expected = 0
    refused: set[str] = set()
    others: list[OtherParent] = []
    for parent, read in fan_out(client, parent_ids, fetch):
        if read is REFUSED:
            refused.add(parent)
            continue
        if read is None:  # the parent was deleted meanwhile
            continue
        items = of_parent(read.items, parent_column, parent) if parent_column else read.items
        if isinstance(items, OtherParent):
            others.append(items)
            refused.add(parent)
            continue
        expected += read.count
        rows.extend(items)
    if parent_column:
        refuse_other_parents(ledger, table, parent_table, parent_column, others)
    return VersionLists(rows, expected, refused)


def loaded_versions(table: Table, lists: VersionLists, ledger: RunLedger) -> Iterator[pa.Table]:
    """`table`'s versions read: the scan recorded for reconciliation and the page, unless a
    refused parent keeps the table whole as loaded (`keep_if_refused`, which acts on the dlt
    resource running now: call this from `table`'s own resource)."""
    ledger.scans.add(table.name, lists.expected, lists.rows, table.key)
    if not keep_if_refused(ledger, table, lists.refused) and lists.rows:
        yield table.page(lists.rows, ledger)


@dlt.resource(**BLUEPRINTS.hints())
def blueprints(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Blueprints (their latest version each): merged each run."""
    yield from optional_whole_list(BLUEPRINTS, client, ledger, opts)


@dlt.transformer(**BLUEPRINT_VERSIONS.hints())
def blueprint_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every blueprint whose record changed since the last run.

    A blueprint record is its latest version (`version_id`, `version_number`, `updated_at`), so
    a new version changes it: on an incremental run only blueprints whose (`version_id`,
    `updated_at`) differ from the last run's have their version list read again. A full scan
    (weekly by default) reads every list.
    """
    state = kept_state()
    heads = dict(zip(_col_arrow(page, "id"), _heads(page), strict=True))
    known = {} if ledger.plan.full_scan else state.get(BLUEPRINT_HEADS, {})
    changed = [b for b, head in heads.items() if head is None or known.get(b) != head]
    # a version is a blueprint record: its `id` is the blueprint's, the one asked
    refused = yield from read_versions(
        BLUEPRINT_VERSIONS, BLUEPRINTS, changed, client, ledger, opts, "id"
    )
    # a refused list keeps its old head, so the next run reads it again
    state[BLUEPRINT_HEADS] = {**known, **{b: h for b, h in heads.items() if b not in refused}}


@dlt.resource(**TENANT_APPS.hints())
def tenant_apps(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Tenant apps (Apple, Windows): merged each run."""
    yield from optional_whole_list(TENANT_APPS, client, ledger, opts)


@dlt.transformer(**TENANT_APP_VERSIONS.hints())
def tenant_app_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every tenant app."""
    ids = page.column("id").to_pylist()
    yield from read_versions(TENANT_APP_VERSIONS, TENANT_APPS, ids, client, ledger, opts, "app_id")


@dlt.resource(**APPLICATIONS.hints())
def applications(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """The Android app catalogue, read whole from the v1 list each run.

    The legacy `/enterprise/{eid}/application/` list misses apps (424 against 752 on v1, live
    §11) and its item routes 404 for ids v1 serves. v1 items carry no `updated_on` and the spec
    documents no filter for them, so the list is read whole (about 3 pages of 250).
    """
    yield from optional_whole_list(APPLICATIONS, client, ledger, opts)


@dlt.transformer(**APPLICATION_VERSIONS.hints())
def application_versions(
    page: pa.Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every application whose latest version changed since the last run.

    A v1 application item names its `latest_version`, so a new version changes it: an incremental
    run re-reads only the version lists of applications whose `latest_version.id` differs from the
    last run's (and of applications not seen before); a full scan reads every list.
    """
    state = kept_state()
    heads = dict(zip(_col_arrow(page, "id"), _col_arrow(page, "latest_version__id"), strict=True))
    known = {} if ledger.plan.full_scan else state.get(APPLICATION_HEADS, {})
    changed = [a for a, head in heads.items() if head is None or known.get(a) != head]
    refused = yield from read_versions(
        APPLICATION_VERSIONS, APPLICATIONS, changed, client, ledger, opts, "application_id"
    )
    # the list is read whole: apps missing from it are gone; a refused list is read again
    state[APPLICATION_HEADS] = {a: h for a, h in heads.items() if a not in refused}


def _heads(page: pa.Table) -> list[str | None]:
    """Each blueprint's head, its current version id and `updated_at` (None: neither is served)."""
    versions = _col_arrow(page, "version_id") or [None] * page.num_rows
    updated = _col_arrow(page, "updated_at") or [None] * page.num_rows
    return [
        f"{v} {u.isoformat()}" if v and u else None for v, u in zip(versions, updated, strict=True)
    ]


def _col_arrow(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else []


def shared_list(table: Table, client: EsperClient, ledger: RunLedger, opts: Options) -> ListRead:
    """A tenant-level list read whole once per run: the first table asking for it reads it, the
    tables built from it (a user's detail, a role's scopes, a profile's versions) share it."""
    return ledger.shared.read_once(table.name, lambda: read_list(table, client, ledger, opts))


def optional_shared_list(
    table: Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """The table of a `shared_list` a tenant may lack, reconciled with its count; a 403/404 skips
    it (and, raised again to each table built from the list, those too) for the run."""
    with skip_unavailable(ledger, table.name):
        read = shared_list(table, client, ledger, opts)
        ledger.scans.add(table.name, read.count, read.items, table.key)
        if read.items:
            yield table.page(read.items, ledger)


def optional_whole_list(
    table: Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """`whole_list` of a route a tenant may lack (a plan feature, a platform): a 403/404 skips
    the table for the run, which keeps what earlier runs loaded; the rest loads."""
    yield from unless_skipped(ledger, table.name, lambda: whole_list(table, client, ledger, opts))


# How a `Table.whole_list` is read, by its kind (`table.WholeList`).
LIST_READERS = {"own": optional_whole_list, "shared": optional_shared_list, "core": whole_list}


def list_resource(table: Table) -> DltResource:
    """The resource of a tenant-level list read whole each run (`Table.whole_list`), made from
    its declaration: nothing about the list is written twice."""
    read = LIST_READERS[table.whole_list or ""]

    def rows(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
        yield from read(table, client, ledger, opts)

    rows.__name__ = rows.__qualname__ = table.name
    rows.__doc__ = f"`{table.name}`: {table.doc.kept or 'read whole each run'}."
    return dlt.resource(rows, **table.hints())
