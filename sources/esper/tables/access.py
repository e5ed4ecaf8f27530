"""Who may act on the fleet: the tenant's users, their legacy profiles and group access, the
roles and the scopes each role grants. Small lists, read whole each run (replaced).

The users list (`/authn2/v1/users/`, live route 32) names each user but holds no role, no
`last_login` and no `is_active`: those are on the legacy detail `/user/{id}/` (live route 31),
read once per user. Group access is authz2's `/authz2/v1/users/{user_id}/groups`, one per user;
roles (`{count, roles}`, no links) and each role's scopes (a bare array) are authz2's too (spec
only: docs/spec/openapi-notes-credentials-access.md sections 3-4). Requests per run: 1 + 2 per
user + 1 + 1 per role (docs/decisions.md, "Who may act on the fleet").

Every route here may be refused to a key without the user or role scopes (403) or to a plan
without the feature (404): the tables built from it are skipped for the run and keep what
earlier runs loaded; the rest of the run loads (exit 6). The users and roles lists are read once
per run (`SharedReads.read_once`) and shared by the tables built from them, so a refused list skips
its children too, naming the refused route.

The legacy detail carries the user's API `token`: it is dropped here (`without_secrets`) before
a page is built, and the table keeps only its declared columns, so it never reaches the
warehouse, the logs or an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import dlt
import pyarrow as pa

from ..common import (
    REFUSED,
    Options,
    OtherParent,
    keep_if_refused,
    of_parent,
    refuse_other_parents,
    refused_part,
    skip_unavailable,
)
from ..http import EsperClient, EsperError
from ..http.pages import bare_items, bare_object, fan_out
from ..http.paginators import OffsetPaginator, SinglePage
from ..run.ledger import RunLedger
from ..table import BOOL, INT, JSON, Col, Doc, Evidence, Table, cols, flat
from .catalogues import shared_list
from .credentials import NOTES  # the notes on these routes' shapes too

# Fields of an answer that are credentials, dropped at any depth before a page is built.
SECRET_FIELDS = frozenset({"token"})

USERS = Table(
    "users",
    "/authn2/v1/users/",
    ("user_id",),
    disposition="replace",
    columns=(  # live route 32; times have no declared format (authn2: "timestamp"): text
        *cols("user_id name email connection_id tenant_id partner_id created_at updated_at"),
        Col("legacy_user_id", INT),
    ),
    doc=Doc(
        read="(live route 32, `{content: {count, next, prev, results}}`)",
        columns="`name`, `email`, `legacy_user_id` (the id of the legacy user routes), "
        "`connection_id`, `tenant_id`, `created_at`, `updated_at` (text: no declared format)",
        kept="replaced each run, reconciled with the list's count. A key without the user scopes "
        "(403) or a plan without the feature (404) skips it and the tables read per user, "
        "keeping their last rows (exit 6)",
        envelope="content-list (`prev`), no code or message; items without role, `last_login` "
        "or `is_active`",
    ),
    whole_list="shared",
)
USER_PROFILES = Table(
    "user_profiles",
    "/user/{id}/",
    ("id",),
    paginator=SinglePage,
    disposition="replace",
    loaded_with="users",
    parent="users",
    parent_key="legacy_user_id",
    keep_extra=False,  # only these columns: a field the API adds (a secret) is not loaded
    columns=(  # live route 31, one per user; `user_id` is the authn2 user it was read for
        Col("id", INT),
        *cols("user_id username email first_name last_name full_name last_login"),
        *cols("is_active is_staff is_superuser", BOOL),
        *flat("profile__role profile__authz_role_id profile__authn_user_id"),
        *flat("profile__enterprise profile__created_on profile__updated_on"),
        *flat("profile__has_all_group_access profile__can_factory_reset", BOOL),
        *flat("profile__groups", JSON),
    ),
    doc=Doc(
        read="(live route 31; `{id}` = `legacy_user_id`), one request per user with a "
        "`legacy_user_id`",
        columns="`username`, `is_active`, `is_staff`, `is_superuser`, `last_login`, "
        "`profile__role` (the legacy role name, e.g. `Enterprise Admin`), "
        "`profile__authz_role_id` (null when the role is known by name only), "
        "`profile__has_all_group_access`, `profile__can_factory_reset`, `profile__groups` "
        "(JSON); `user_id` is the `users` row it was read for. The answer's `token` (the user's "
        "API token) is dropped before loading and only declared columns are kept",
        kept="replaced each run; a user deleted meanwhile (a 404, and gone from the users list) "
        "is left out, a 404 for a user still listed keeps the table as it was (exit 6); skipped "
        "like `users`",
        envelope="bare object; `profile.role`, `profile.authz_role_id` (null live), "
        "`last_login`, `is_active`, and a `token` (the user's API token: never loaded)",
    ),
)
USER_GROUPS = Table(
    "user_groups",
    "/authz2/v1/users/{id}/groups",
    ("user_id",),
    paginator=SinglePage,
    disposition="replace",
    loaded_with="users",
    parent="users",
    parent_key="user_id",
    columns=(  # spec UserGroups, one per user; `group_ids` a JSON array (one row per user)
        Col("user_id"),
        Col("has_all_group_access", BOOL),
        Col("group_ids", JSON),
    ),
    doc=Doc(
        read="(spec `UserGroups`, a bare object; `{id}` = the authn2 `user_id`), one per user",
        columns="`has_all_group_access`, `group_ids` (JSON array: one row per user, not a child "
        "table)",
        kept="replaced each run; skipped like `users` (a 403 on `/authz2/*` skips it alone)",
        envelope="bare object `{group_ids, has_all_group_access}`",
        evidence=Evidence(NOTES, "esper-cli authz2.yaml"),
    ),
)
ROLES = Table(
    "roles",
    "/authz2/v1/roles/",
    ("id",),
    paginator=OffsetPaginator,
    disposition="replace",
    columns=(  # spec RoleResponse, in `{count, roles}` (no links: `http/pages.py`)
        *cols("id name description"),
        *cols("role_type organization_type", INT),
    ),
    doc=Doc(
        read="(spec: `{count, roles}`, no links: read by offset until `count`)",
        columns="`name`, `description`, `role_type`, `organization_type`",
        kept="replaced each run, reconciled with the count; a 403/404 skips it and "
        "`role_scopes` (exit 6)",
        envelope="`{count, roles}`: no links, read by `offset` until `count`",
        evidence=Evidence(NOTES, "esper-cli authz2.yaml"),
    ),
    whole_list="shared",
)
ROLE_SCOPES = Table(
    "role_scopes",
    "/authz2/v1/roles/{id}/scopes",
    ("role_id", "id"),
    paginator=SinglePage,
    disposition="replace",
    loaded_with="roles",
    parent="roles",
    columns=(  # spec ScopeResponse, a bare array per role; `role_id` is the role read
        *cols("role_id id name description"),
        *cols("scope_type organization_type", INT),
    ),
    doc=Doc(
        read="(spec: a bare array of `ScopeResponse`), one per role",
        columns="`name` (`create:device_command:WIPE`, `read:device`, ...), `description`, "
        "`scope_type`; `role_id` is the role read",
        kept="replaced each run; a role deleted meanwhile (a 404, and gone from the roles list) "
        "is left out, a 404 for a role still listed keeps the table as it was (exit 6); skipped "
        "like `roles`. Staging splits the name into `scope_action`, `scope_resource`, "
        "`scope_qualifier`",
        envelope="bare array of `{id, name, description, scope_type, organization_type}`",
        evidence=Evidence(NOTES, "esper-cli authz2.yaml"),
    ),
)
TABLES = (USERS, USER_PROFILES, USER_GROUPS, ROLES, ROLE_SCOPES)
TABLES_BY_NAME = {table.name: table for table in TABLES}


def without_secrets(value: Any) -> Any:
    """`value` with every `SECRET_FIELDS` key removed, at any depth (a copy; lists too)."""
    if isinstance(value, dict):
        return {k: without_secrets(v) for k, v in value.items() if k not in SECRET_FIELDS}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


Parent = tuple[str, Any]  # (the parent's key, the id its route names)


def _per_parent(
    table: Table,
    client: EsperClient,
    ledger: RunLedger,
    parents: list[Parent],
    rows_of: Callable[[Parent, Any, str], list[dict] | OtherParent],
    column: str,
) -> list[dict] | None:
    """One request per parent, concurrently; `rows_of(parent, body, where)` makes the rows,
    each with the parent asked in `column` (`common.of_parent`: an answer naming another
    parent refuses its part, named). The parents are this run's list (`shared_list`, which
    notes them: `common.note_listed`): a 404 is a refused part even when the list read again
    leaves the parent out. None when some parent was refused (counted): the table keeps what it
    holds (`keep_if_refused`), as replacing it would drop the refused parents' rows."""
    parent_table = TABLES_BY_NAME[table.parent or ""]

    def fetch(parent: Parent) -> Any:
        try:
            return client.get(table.path_for(client, parent[1]))
        except EsperError as error:
            refused = refused_part(
                ledger, client, table.name, parent_table, parent[0], error, retry=None
            )
            return REFUSED if refused else None

    rows: list[dict] = []
    refused: set[str] = set()
    others: list[OtherParent] = []
    where = f"GET {table.path}"
    for parent, body in fan_out(client, parents, fetch):
        if body is REFUSED:
            refused.add(parent[0])
        elif body is not None:
            read = rows_of(parent, body, where)
            if isinstance(read, OtherParent):
                others.append(read)
                refused.add(parent[0])
            else:
                rows.extend(read)
    refuse_other_parents(ledger, table, parent_table, column, others)
    return None if keep_if_refused(ledger, table, refused) else rows


def _yield_rows(table: Table, ledger: RunLedger, rows: list[dict] | None) -> Iterator[pa.Table]:
    if rows is None:  # some parent refused: the table is kept as loaded
        return
    ledger.scans.add(table.name, len(rows), rows, table.key)
    if rows:
        yield table.page(rows, ledger)


def _profile_rows(parent: Parent, body: Any, where: str) -> list[dict] | OtherParent:
    """The legacy detail of the user asked: its `id` is the legacy id the route named, and
    `profile.authn_user_id` the authn2 user (`user_id`) it was read for."""
    user_id, legacy_id = parent
    profile = without_secrets(bare_object(body, where=where))
    rows = of_parent([profile], "id", legacy_id)
    if isinstance(rows, OtherParent):
        return rows
    return of_parent(rows, "user_id", user_id, _authn_user)


def _authn_user(item: dict) -> tuple[object, object]:
    nested = item.get("profile")
    return item.get("user_id"), nested.get("authn_user_id") if isinstance(nested, dict) else None


@dlt.resource(**USER_PROFILES.hints())
def user_profiles(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Each user's legacy detail: role name, `authz_role_id`, `last_login`, `is_active`, ...
    (its `token` dropped). A user without a `legacy_user_id` has none."""
    with skip_unavailable(ledger, USER_PROFILES.name):
        read = shared_list(USERS, client, ledger, opts)
        parents = [
            (str(u["user_id"]), u["legacy_user_id"])  # as served: the row's `id` if it lacks one
            for u in USERS.require(read.items, ledger)
            if u.get("legacy_user_id") is not None
        ]
        rows = _per_parent(USER_PROFILES, client, ledger, parents, _profile_rows, "id")
        yield from _yield_rows(USER_PROFILES, ledger, rows)


def _group_rows(parent: Parent, body: Any, where: str) -> list[dict] | OtherParent:
    access = bare_object(body, where=where)
    row = {
        "user_id": access.get("user_id"),  # the spec's `UserGroups` has none: filled as asked
        "has_all_group_access": access.get("has_all_group_access"),
        "group_ids": access.get("group_ids"),
    }
    return of_parent([row], "user_id", parent[0])


@dlt.resource(**USER_GROUPS.hints())
def user_groups(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Each user's group access (authz2): all groups, or the ids of the groups named."""
    with skip_unavailable(ledger, USER_GROUPS.name):
        read = shared_list(USERS, client, ledger, opts)
        parents = [
            (str(u["user_id"]), str(u["user_id"])) for u in USERS.require(read.items, ledger)
        ]
        rows = _per_parent(USER_GROUPS, client, ledger, parents, _group_rows, "user_id")
        yield from _yield_rows(USER_GROUPS, ledger, rows)


def _scope_rows(parent: Parent, body: Any, where: str) -> list[dict] | OtherParent:
    return of_parent(bare_items(body, where=where), "role_id", parent[0])


@dlt.resource(**ROLE_SCOPES.hints())
def role_scopes(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """The scopes each role grants (`create:device_command:WIPE`, `read:device`, ...). A role
    granting none has no row (the mart then calls its scopes unknown: never guessed)."""
    with skip_unavailable(ledger, ROLE_SCOPES.name):
        read = shared_list(ROLES, client, ledger, opts)
        parents = [(str(r["id"]), str(r["id"])) for r in ROLES.require(read.items, ledger)]
        rows = _per_parent(ROLE_SCOPES, client, ledger, parents, _scope_rows, "role_id")
        yield from _yield_rows(ROLE_SCOPES, ledger, rows)


# Read in this order beside the other tenant-level lists (`tables/__init__.py`).
LISTS = (user_profiles, user_groups, role_scopes)  # and `users`, `roles`: `Table.whole_list`
