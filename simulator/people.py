"""The tenant's people: who they are, what their roles let them send, and who sends commands.

One home for the simulated users, read by the routes that serve them (`routes/access.py`) and
by the engine that issues commands and operations in their name (`dynamics/commands.py`), so
that what the access routes say a user may do and what the command list says they did agree.

Scope names are the API's (`create:device_command:<COMMAND>`, `create:group_command:<COMMAND>`:
docs/spec/openapi-notes-credentials-access.md section 4). In the default tenant a command or an
operation is sent only by an active user whose role holds its scope and, for a user limited to
some groups, only to devices of those groups. A named scenario (`SCENARIOS`) lets the tenant
contradict itself the way a misused account would, for the access audit to find.
"""

from __future__ import annotations

from dataclasses import dataclass

from esper_warehouse.simulator.fleet import Fleet

_READ = ("read:device", "read:group", "read:blueprint", "read:app")
# Every command of `catalog.COMMANDS` as a device command, the group-capable ones as group
# commands (the API's group scope list has no CLEAR_APP_DATA, BEEP_DEVICE or CONVERGE).
ROLE_SCOPES: dict[str, tuple[str, ...]] = {
    "Enterprise Admin": (
        *_READ,
        "update:device:group",
        "create:device_command:WIPE",
        "create:device_command:REBOOT",
        "create:device_command:LOCK",
        "create:device_command:SHUT_DOWN",
        "create:device_command:CLEAR_PASSCODE",
        "create:device_command:INSTALL",
        "create:device_command:UPDATE_HEARTBEAT",
        "create:device_command:SET_NEW_POLICY",
        "create:device_command:CLEAR_APP_DATA",
        "create:device_command:BEEP_DEVICE",
        "create:device_command:SET_WIFI_STATE",
        "create:device_command:NOTIFY_DEVICE",
        "create:device_command:SET_TIMEZONE",
        "create:device_command:CONVERGE",
        "create:group_command:WIPE",
        "create:group_command:REBOOT",
        "create:group_command:LOCK",
        "create:group_command:INSTALL",
        "create:group_command:UPDATE_HEARTBEAT",
        "create:group_command:SET_NEW_POLICY",
        "create:group_command:SET_WIFI_STATE",
        "create:group_command:NOTIFY_DEVICE",
        "create:group_command:SET_TIMEZONE",
        "create:operation:REBOOT",
    ),
    "Viewer": (*_READ, "read:event_feed"),
    "Group Admin": (
        "read:device",
        "read:group",
        "create:device_command:REBOOT",
        "create:device_command:NOTIFY_DEVICE",
        "create:group_command:LOCK",
        "create:group_command:INSTALL",
    ),
    "Group Viewer": ("read:device", "read:group"),
}


@dataclass(frozen=True)
class Person:
    """One user of the tenant.

    Attributes:
        name: display name (authn2 `name`).
        role: the legacy role name (`profile.role`); its scopes are `ROLE_SCOPES[role]`.
        by_role_id: the profile names its role by `authz_role_id` (else by legacy name only).
        active: the account is active (`is_active`).
        all_groups: may act on every group; else limited to `LIMITED_GROUPS` leaf groups.
        login_hours_ago: hours from the last login to now; None = never logged in.
    """

    name: str
    role: str
    by_role_id: bool
    active: bool
    all_groups: bool
    login_hours_ago: float | None


# Five users, each showing one case the audit must get right (routes/access.py says which).
PEOPLE: tuple[Person, ...] = (
    Person("Ada Admin", "Enterprise Admin", True, True, True, 2.0),
    Person("Victor Viewer", "Viewer", True, True, True, 72.0),
    Person("Grace Groupadmin", "Group Admin", False, True, False, 26.0),
    Person("Ian Inactive", "Enterprise Admin", True, False, True, 200 * 24.0),
    Person("Uma Unmatched", "Enterprise User", False, True, True, None),
)
LIMITED_GROUPS = 2  # a user limited to some groups acts on the fleet's first two leaf groups

# Named scenarios, set when the simulator is built (`Simulator(scenario=...)`, `--scenario`).
MISUSED_ACCOUNTS = "misused_accounts"
SCENARIOS = {
    MISUSED_ACCOUNTS: (
        "commands come from whichever user the seed draws: a Viewer sends REBOOT and LOCK, an "
        "inactive admin keeps sending after the last login (marts.fleet_access reports both)"
    ),
}


def check_scenario(scenario: str | None) -> None:
    """Raise ValueError naming the known scenarios when `scenario` is not one of them."""
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(sorted(SCENARIOS))}")


def limited_groups(f: Fleet, k: int) -> list[int]:
    """The groups person `k` is limited to (empty for a user who may act on every group)."""
    return [] if PEOPLE[k].all_groups else f.leaf_groups[:LIMITED_GROUPS]


def may_send(f: Fleet, k: int, command: str, group: int, devices: list[int]) -> bool:
    """Whether person `k` may send `command` to `group` (-1: a device request) or `devices`.

    The role must hold the command's scope of the request's kind, the account must be active
    (an inactive account sends nothing after its last login), and a user limited to some groups
    may only reach devices of those groups.
    """
    person = PEOPLE[k]
    kind = "group_command" if group >= 0 else "device_command"
    if not person.active or f"create:{kind}:{command}" not in ROLE_SCOPES.get(person.role, ()):
        return False
    if person.all_groups:
        return True
    allowed = set(limited_groups(f, k))
    if group >= 0:
        return group in allowed
    return all(f.group[d] in allowed for d in devices)


def sender(f: Fleet, drawn: int, command: str, group: int, devices: list[int]) -> int | None:
    """Who sends the request: the drawn person if they may, else the next one who may.

    Returns None when nobody may (the caller then sends it otherwise or not at all).
    """
    n = len(f.users)
    for step in range(n):
        k = (drawn + step) % n
        if may_send(f, k, command, group, devices):
            return k
    return None
