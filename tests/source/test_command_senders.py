"""Who sent the commands: on the default simulated tenant every command comes from an active
user whose role holds its scope; with the `misused_accounts` scenario some do not, and
`marts.fleet_access` reports them (`commands_beyond_role`, `commands_while_inactive`).

The expectations are read from the API's own answers (users, their legacy details, roles and
their scopes, the command list), by the rules the mart documents, in Python: the warehouse and
the expectation only meet in the assertions.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET
from tests.pipeline.helpers import load

TRUTH = ("users", "user_profiles", "roles", "role_scopes", "command_requests")
FINDINGS = "name, commands_sent, commands_beyond_role, commands_while_inactive"


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def expected_findings(truth: dict[str, list[dict[str, Any]]]) -> dict[str, tuple]:
    """name -> (commands sent, beyond the role, while inactive), from the API's answers."""
    roles_by_name = Counter(r["name"].lower() for r in truth["roles"])
    role_of_name = {r["name"].lower(): r["id"] for r in truth["roles"]}
    scopes: dict[str, set[str]] = {}
    for scope in truth["role_scopes"]:
        scopes.setdefault(scope["role_id"], set()).add(scope["name"])
    anywhere = set().union(*scopes.values())
    profiles = {p["profile"]["authn_user_id"]: p for p in truth["user_profiles"]}
    sent: dict[str, list[dict]] = {}
    for request in truth["command_requests"]:
        sent.setdefault(request["created_by"], []).append(request)
    found = {}
    for user in truth["users"]:
        profile = profiles[user["user_id"]]
        legacy_role = profile["profile"]["role"].lower()
        role = profile["profile"]["authz_role_id"] or (
            role_of_name.get(legacy_role) if roles_by_name[legacy_role] == 1 else None
        )
        held = scopes.get(role) if role else None
        last_login = _when(profile["last_login"])
        beyond = inactive = 0
        for request in sent.get(user["user_id"], []):
            kind = "group_command" if request["command_type"] == "GROUP" else "device_command"
            scope = f"create:{kind}:{request['command']}"
            beyond += held is not None and scope in anywhere and scope not in held
            created = _when(request["created_at"])
            inactive += not profile["is_active"] and (last_login is None or created > last_login)
        mine = len(sent.get(user["user_id"], []))
        found[user["name"]] = (mine, beyond if held is not None else None, inactive)
    return found


def _findings(wh: Path) -> dict[str, tuple]:
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(f"select {FINDINGS} from marts.fleet_access").fetchall()
    return {name: tuple(rest) for name, *rest in rows}


def test_on_the_default_tenant_every_command_comes_from_an_active_user_whose_role_sends_it(
    sim, tmp_path: Path, first_load
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    truth = {table: sim.truth(table) for table in TRUTH}
    want = expected_findings(truth)
    assert sum(sent for sent, _, _ in want.values()) == len(truth["command_requests"]) > 0
    assert all(not beyond and not inactive for _, beyond, inactive in want.values()), want
    assert _findings(wh) == want


def test_the_misused_accounts_scenario_is_a_finding_of_the_access_mart(tmp_path: Path) -> None:
    wh = tmp_path / "warehouse.duckdb"
    with Simulator(
        devices=SMALL_FLEET,
        seed=SEED,
        api_key=API_KEY,
        enterprise_id=ENTERPRISE_ID,
        scenario="misused_accounts",
    ) as sim:
        assert load(sim, wh).exit_code == 0
        truth = {table: sim.truth(table) for table in TRUTH}
    want = expected_findings(truth)
    # the scenario's point: a Viewer sent what the role does not allow, an inactive admin sent
    # after the last login
    assert want["Victor Viewer"][1] > 0 and want["Ian Inactive"][2] > 0, want
    assert _findings(wh) == want
