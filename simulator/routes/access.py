"""Who may act on the fleet: users, their legacy detail and group access, roles and scopes.

The area whole in one module: records shaped like the live answers (`/authn2/v1/users/`, live route
32; `/user/{id}/`, live route 31) and the spec's (authz2,
docs/spec/openapi-notes-credentials-access.md section 4), the five routes and their truth (`AREA`).
The users, their roles and scopes live in `simulator/people.py` (the engine sends commands in their
name); five users, each showing one case the audit must get right:

- an Enterprise Admin whose role (by `authz_role_id`) may wipe, reboot and lock;
- a Viewer whose role grants read scopes only;
- a Group Admin with no `authz_role_id` (its role is known by its legacy name only), limited to
  two real groups of the fleet, whose role reboots and locks but does not wipe;
- an inactive Enterprise Admin who last logged in 200 days ago;
- an Enterprise User whose legacy role name matches no role (the audit must not guess), never
  logged in.

The legacy detail carries a `token` (the user's API token): a recognisable fake secret
(`TOKEN_MARK`) that must never reach the warehouse. Routes are made to refuse with the
simulator's faults (`{"kind": "status", "status": 403, "route": "/authz2/*"}`).
"""

from __future__ import annotations

from typing import Any

from esper_warehouse.simulator.fleet import DAY, derived_id
from esper_warehouse.simulator.http import LEGACY, V2, ApiError, Req
from esper_warehouse.simulator.people import PEOPLE, ROLE_SCOPES, limited_groups
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, v2_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.sources.esper.tables.access import ROLES, USERS

TOKEN_MARK = "SIMULATED-SECRET-API-TOKEN"
HOUR = DAY // 24
LEGACY_ID_BASE = 4100  # legacy user ids are integers


def set_role_scopes(w: World, name: str, scopes: tuple[str, ...]) -> None:
    """The role called `name` grants `scopes` from now on (tests: scope names of other forms)."""
    with w.lock:
        _role_scopes_of(w)[name] = tuple(scopes)


def _role_scopes_of(w: World) -> dict[str, tuple[str, ...]]:
    if not hasattr(w, "role_scope_names"):
        w.role_scope_names = dict(ROLE_SCOPES)  # type: ignore[attr-defined]
    return w.role_scope_names  # type: ignore[attr-defined,no-any-return]


def role_id(w: World, name: str) -> str:
    """The id of the role called `name`."""
    return derived_id("role", w.fleet.seed, name)


def _user_id(w: World, k: int) -> str:
    users = w.fleet.users
    return users[k] if k < len(users) else derived_id("user", w.fleet.seed, k)


def _created(w: World, k: int) -> int:
    return w.fleet.groups[0].created + k * DAY


def _email(name: str) -> str:
    return name.lower().replace(" ", ".") + "@example.com"


def users(w: World) -> list[dict]:
    """`/authn2/v1/users/` items (live route 32): no role, no `last_login`, no `is_active`."""
    return [
        {
            "user_id": _user_id(w, k),
            "legacy_user_id": LEGACY_ID_BASE + k,
            "name": name,
            "email": _email(name),
            "connection_id": f"con_{derived_id('connection', w.fleet.seed)[:16]}",
            "tenant_id": w.fleet.tenant_id,
            "partner_id": None,
            "created_at": iso(_created(w, k)),
            "updated_at": iso(_created(w, k)),
        }
        for k, name in enumerate(p.name for p in PEOPLE)
    ]


def _groups(w: World, k: int) -> list[dict]:
    """The groups a user is limited to: none for all-group users, else two leaf groups."""
    picked = limited_groups(w.fleet, k)
    if not picked:
        return []
    counts = w.group_counts()
    return [
        {
            "id": w.fleet.groups[g].id,
            "name": w.fleet.groups[g].name,
            "path": w.fleet.groups[g].path,
            "device_count": counts[g],
        }
        for g in picked
    ]


def user_detail(w: World, k: int) -> dict[str, Any]:
    """`/user/{id}/` (live route 31): the legacy user with its profile and its API `token`."""
    person = PEOPLE[k]
    name, legacy_role, hours = person.name, person.role, person.login_hours_ago
    first, last = name.split(" ", 1)
    created = iso(_created(w, k))
    return {
        "id": LEGACY_ID_BASE + k,
        "username": _email(name),
        "email": _email(name),
        "first_name": first,
        "last_name": last,
        "full_name": name,
        "is_active": person.active,
        "is_staff": False,
        "is_superuser": False,
        "last_login": None if hours is None else iso(w.now - round(hours * HOUR)),
        "has_emm": False,
        "is_email_verified": None,
        "emm": None,
        "token": f"{TOKEN_MARK}-{derived_id('token', w.fleet.seed, k)}",
        "profile": {
            "id": 9100 + k,
            "role": legacy_role,
            "authz_role_id": role_id(w, legacy_role) if person.by_role_id else None,
            "authn_user_id": _user_id(w, k),
            "authn_connection_id": f"con_{derived_id('connection', w.fleet.seed)[:16]}",
            "enterprise": w.fleet.enterprise_id,
            "enterprise_user_id": None,
            "groups": _groups(w, k),
            "has_all_group_access": person.all_groups,
            "can_factory_reset": legacy_role == "Enterprise Admin",
            "default_password_changed": True,
            "is_customer": True,
            "is_developer": False,
            "is_endpoint_creator": False,
            "setup_wizard_complete": True,
            "created_on": created,
            "updated_on": created,
        },
    }


def user_profiles(w: World) -> list[dict]:
    """Every user's legacy detail, as served (token included: the source drops it)."""
    return [user_detail(w, k) for k in range(len(PEOPLE))]


def user_groups(w: World) -> list[dict]:
    """`/authz2/v1/users/{user_id}/groups` answers, with the user they were asked for."""
    return [{"user_id": _user_id(w, k), **_group_access(w, k)} for k in range(len(PEOPLE))]


def _group_access(w: World, k: int) -> dict[str, Any]:
    return {
        "group_ids": [g["id"] for g in _groups(w, k)],
        "has_all_group_access": PEOPLE[k].all_groups,
    }


def roles(w: World) -> list[dict]:
    """`RoleResponse` records (all fields required by the spec)."""
    return [
        {
            "id": role_id(w, name),
            "name": name,
            "description": f"{name} (simulated)",
            "role_type": 1,
            "organization_type": 1,
        }
        for name in ROLE_SCOPES
    ]


def _scope(name: str) -> dict[str, Any]:
    return {
        "id": derived_id("scope", name),
        "name": name,
        "description": f"Allows {name}",
        "scope_type": 1,
        "organization_type": 1,
    }


def role_scopes(w: World) -> list[dict]:
    """Every role's `ScopeResponse` records, with the role they were asked for."""
    return [
        {**_scope(scope), "role_id": role_id(w, name)}
        for name, scopes in _role_scopes_of(w).items()
        for scope in scopes
    ]


def _users_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /authn2/v1/users/: `{content: {count, next, prev, results}}` (live route 32)."""
    items = users(w)
    legacy = req.query.get("legacy_user_id")
    if legacy:
        items = [u for u in items if str(u["legacy_user_id"]) == legacy]
    return 200, v2_list(req, items, lambda r: r, 20)


def _person(found: int | None, what: str) -> int:
    if found is None:
        raise ApiError(404, f"{what} not found")
    return found


def _user_detail(w: World, req: Req) -> tuple[int, Body]:
    """GET /user/{id}/: the bare legacy user (live route 31)."""
    ids = {str(LEGACY_ID_BASE + k): k for k in range(len(PEOPLE))}
    return 200, user_detail(w, _person(ids.get(req.params["id"]), "User"))


def _user_groups(w: World, req: Req) -> tuple[int, Body]:
    """GET /authz2/v1/users/{user_id}/groups: a bare `UserGroups` object."""
    ids = {_user_id(w, k): k for k in range(len(PEOPLE))}
    return 200, _group_access(w, _person(ids.get(req.params["id"].lower()), "User"))


def _roles_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /authz2/v1/roles/: `{count, roles}`, no links (paged by limit and offset)."""
    items = roles(w)
    name = req.query.get("name")
    if name:
        items = [r for r in items if r["name"] == name]
    offset, limit = req.page(20)
    return 200, {"count": len(items), "roles": items[offset : offset + limit]}


def _role_scopes(w: World, req: Req) -> tuple[int, Body]:
    """GET /authz2/v1/roles/{role_id}/scopes: a bare array of `ScopeResponse`."""
    by_id = {role_id(w, name): name for name in ROLE_SCOPES}
    name = by_id.get(req.params["id"].lower())
    if name is None:
        raise ApiError(404, "Role not found")
    return 200, [_scope(scope) for scope in _role_scopes_of(w)[name]]


AREA = Area(
    routes=(
        Route("GET", USERS.path, V2, _users_list),
        Route("GET", "/user/{id}/", LEGACY, _user_detail),
        Route("GET", "/authz2/v1/users/{id}/groups", V2, _user_groups),
        Route("GET", ROLES.path, V2, _roles_list),
        Route("GET", "/authz2/v1/roles/{id}/scopes", V2, _role_scopes),
    ),
    truth={
        "users": users,
        "user_profiles": user_profiles,
        "user_groups": user_groups,
        "roles": roles,
        "role_scopes": role_scopes,
    },
)
