"""Who may act on the fleet: users, profiles, group access, roles and scopes load as served (the
API token never stored), `marts.fleet_access` gives each simulated user the verdict its role's
scopes allow, and a key without the user or role scopes loads everything else (exit 6)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb
import httpx
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views.status import morning_check
from esper_warehouse.pipelines.warehouse import working_dir
from esper_warehouse.simulator.routes.access import TOKEN_MARK, role_id, set_role_scopes
from esper_warehouse.sources.esper.tables.access import SECRET_FIELDS, USERS, without_secrets

from tests.pipeline.helpers import load, with_body

ACCESS = ("users", "user_profiles", "user_groups", "roles", "role_scopes")
KEYS = {
    "users": ("user_id",),
    "user_profiles": ("id",),
    "user_groups": ("user_id",),
    "roles": ("id",),
    "role_scopes": ("role_id", "id"),
}
ADMIN = "CLEAR_APP_DATA, CLEAR_PASSCODE, LOCK, REBOOT, SHUT_DOWN, WIPE"
# name -> (is_active, role_name, role_matched_by, all groups, group_count, scopes_known,
#          can_wipe, can_reboot, can_lock, destructive_commands), as the simulator's people are
VERDICTS = {
    "Ada Admin": (True, "Enterprise Admin", "authz_role_id", True, 0, True, True, True, True, ADMIN),
    "Victor Viewer": (True, "Viewer", "authz_role_id", True, 0, True, False, False, False, ""),
    "Grace Groupadmin": (
        True, "Group Admin", "legacy role name", False, 2, True, False, True, True, "LOCK, REBOOT",
    ),
    "Ian Inactive": (
        False, "Enterprise Admin", "authz_role_id", True, 0, True, True, True, True, ADMIN,
    ),
    "Uma Unmatched": (True, "Enterprise User", None, True, 0, False, None, None, None, None),
}  # fmt: skip
COLUMNS = (
    "is_active, role_name, role_matched_by, has_all_group_access, group_count, scopes_known, "
    "can_wipe, can_reboot, can_lock, destructive_commands"
)


def _keys(con: duckdb.DuckDBPyConnection, table: str) -> set[tuple]:
    names = ", ".join(KEYS[table])
    return {tuple(r) for r in con.execute(f"select {names} from esper.{table}").fetchall()}


def _truth_keys(sim, table: str) -> set[tuple]:
    return {tuple(r[k] for k in KEYS[table]) for r in sim.truth(table)}


def _verdicts(wh: Path) -> dict[str, tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(f"select name, {COLUMNS} from marts.fleet_access").fetchall()
    return {name: tuple(rest) for name, *rest in rows}


def _token_found(wh: Path) -> list[str]:
    """Where the simulator's token text is in the warehouse: a column, a value, the file's bytes,
    or a file of dlt's working folder (load packages, state)."""
    found = []
    with duckdb.connect(str(wh), read_only=True) as con:
        columns = con.execute(
            "select table_schema, table_name, column_name, data_type from "
            "information_schema.columns where table_catalog = current_database()"
        ).fetchall()
        for schema, table, column, data_type in columns:
            if column.lower() in SECRET_FIELDS:
                found.append(f"column {schema}.{table}.{column}")
            if data_type in ("VARCHAR", "JSON"):
                hits = con.execute(
                    f'select count(*) from "{schema}"."{table}" where "{column}" like ?',
                    [f"%{TOKEN_MARK}%"],
                ).fetchone()[0]
                if hits:
                    found.append(f"value in {schema}.{table}.{column}")
    paths = [wh, *(p for p in working_dir(wh).rglob("*") if p.is_file())]
    found += [str(p) for p in paths if TOKEN_MARK.encode() in p.read_bytes()]
    return found


def test_access_loads_as_served_and_the_mart_says_who_may_wipe(
    sim, shared_first_load, shared_modelled_load
) -> None:
    """The shared first load (the raw tables, searched for the token), then the models built on
    it, both read only."""
    wh = shared_first_load.warehouse
    assert shared_first_load.result.exit_code == 0
    with duckdb.connect(str(wh), read_only=True) as con:
        for table in ACCESS:
            assert _keys(con, table) == _truth_keys(sim, table), table
        logins = dict(con.execute("select id, last_login from esper.user_profiles").fetchall())
    assert logins == {p["id"]: p["last_login"] for p in sim.truth("user_profiles")}
    assert _token_found(wh) == []
    wh = shared_modelled_load.warehouse
    assert _verdicts(wh) == VERDICTS
    with duckdb.connect(str(wh), read_only=True) as con:
        grace = con.execute(
            "select group_ids from staging.stg_esper__user_groups where user_id = ?",
            [next(u["user_id"] for u in sim.truth("users") if u["name"] == "Grace Groupadmin")],
        ).fetchone()[0]
        groups = {g["id"] for g in sim.truth("groups")}
    assert len(grace_ids := json.loads(grace)) == 2 and set(grace_ids) <= groups
    # what `esper-warehouse status` and the demo print, counted from VERDICTS (active users only)
    active = [v for v in VERDICTS.values() if v[0]]
    wipe = sum(1 for v in active if v[6])
    any_ = sum(1 for v in active if v[6] or v[7] or v[8])
    unknown = sum(1 for v in active if not v[5])
    with duckdb.connect(str(wh), read_only=True) as con:
        (line,) = [line for line in morning_check(con) if "may wipe" in line]
    assert line == (
        f"active users who may wipe devices (marts.fleet_access): {wipe} of {len(active)}; "
        f"wipe, reboot or lock: {any_}; scopes unknown for {unknown}"
    )


def test_the_token_search_finds_a_stored_token(tmp_path: Path) -> None:
    """Guard: `_token_found` would see a token column or value (else the tests above prove
    nothing)."""
    wh = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(wh)) as con:
        con.execute("create schema esper; create table esper.leak (token varchar, note varchar)")
        con.execute("insert into esper.leak values ('x', ?)", [f"a {TOKEN_MARK}-1 b"])
    found = _token_found(wh)
    assert "column esper.leak.token" in found and "value in esper.leak.note" in found


def test_the_token_is_dropped_at_any_depth() -> None:
    record = {"id": 1, "token": "t", "profile": {"token": "t", "groups": [{"token": "t"}]}}
    assert without_secrets(record) == {"id": 1, "profile": {"groups": [{}]}}


def test_a_key_without_the_role_scopes_loads_the_users_and_keeps_the_roles(
    sim, tmp_path: Path, first_load, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 on every `/authz2/*` route: group access, roles and scopes are skipped and keep
    their rows, the users and their profiles load, the run ends partial and names the routes;
    no log line holds the API token."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 403, "route": "/authz2/*"}])
    sim.advance(hours=24)
    with caplog.at_level(logging.DEBUG):  # the access tables (test_partial_tenant: a whole run)
        nightly = load(sim, wh, resources=["users", "roles"])
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"user_groups", "roles", "role_scopes"}
    assert "GET /authz2/v1/roles/ answered 403" in nightly.unavailable["roles"]
    assert "GET /authz2/v1/roles/ answered 403" in nightly.unavailable["role_scopes"]
    assert "GET /authz2/v1/users/{id}/groups answered 403" in nightly.unavailable["user_groups"]
    assert TOKEN_MARK not in caplog.text and TOKEN_MARK not in (nightly.error or "")
    assert _token_found(wh) == []
    with duckdb.connect(str(wh), read_only=True) as con:
        for table in ACCESS:  # loaded again, or kept from the first load
            assert _keys(con, table) == _truth_keys(sim, table), table
        (loaded,) = con.execute(
            "select count(*) from esper.user_profiles where _dlt_load_id = "
            "(select max(load_id) from esper._dlt_loads)"
        ).fetchone()
    assert loaded == len(sim.truth("user_profiles"))  # loaded by this run
    build_models(wh)
    assert _verdicts(wh) == VERDICTS


def test_a_key_without_the_user_scopes_skips_the_tables_read_per_user(
    sim, tmp_path: Path, first_load
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 403, "route": "/authn2/*"}])
    nightly = load(sim, wh, resources=["users", "roles"])
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"users", "user_profiles", "user_groups"}
    assert all("GET /authn2/v1/users/ answered 403" in t for t in nightly.unavailable.values())
    with duckdb.connect(str(wh), read_only=True) as con:
        assert _keys(con, "users") == _truth_keys(sim, "users")  # kept


def test_a_role_whose_scopes_are_refused_is_counted_and_keeps_its_scopes(
    sim, tmp_path: Path, first_load
) -> None:
    """The Viewer role's scopes answer 404 while the role is still listed: a refused part, not a
    removed role. The run is partial and counts it; `role_scopes` keeps what it held (replacing
    it would drop the Viewer's scopes), so no verdict changes. A role with no scope rows at all
    is unknown, never guessed."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    viewer = role_id(sim.world, "Viewer")
    sim.set_faults([{"kind": "status", "status": 404, "route": f"/authz2/v1/roles/{viewer}/*"}])
    nightly = load(sim, wh, resources=["roles"])
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"role_scopes"}
    assert (
        "1 role(s) skipped: GET /authz2/v1/roles/{id}/scopes answered 404"
        in (nightly.unavailable["role_scopes"])
    )
    build_models(wh)
    assert _verdicts(wh) == VERDICTS

    with duckdb.connect(str(wh)) as con:
        con.execute("delete from esper.role_scopes where role_id = ?", [viewer])
    build_models(wh)
    verdicts = _verdicts(wh)
    assert verdicts["Victor Viewer"] == (
        (True, "Viewer", "authz_role_id", True, 0, False, None, None, None, None)
    )
    assert {n: v for n, v in verdicts.items() if n != "Victor Viewer"} == {
        n: v for n, v in VERDICTS.items() if n != "Victor Viewer"
    }


_READS = ("read:device", "read:group")


@pytest.mark.parametrize(
    ("scopes", "verdict"),
    [
        # a wildcard, a command scope naming no command, a dotted name: may grant anything
        (("create:device_command:*",), (False, "create:device_command:*", None, None, None, None)),
        (("create:device_command",), (False, "create:device_command", None, None, None, None)),
        (("device.command.wipe",), (False, "device.command.wipe", None, None, None, None)),
        # what a readable scope grants is known whatever the unreadable one may add
        (
            ("create:device_command:WIPE", "create:operation:*"),
            (False, "create:operation:*", True, None, None, "WIPE"),
        ),
        # the API's own forms, in any case: read whole, "cannot" only then
        (
            ("Create:Group_Command:wipe", "create:operation:REBOOT", "update:device:group"),
            (True, None, True, True, False, "REBOOT, WIPE"),
        ),
    ],
)
def test_a_scope_of_an_unknown_form_is_never_read_as_cannot(
    sim, tmp_path: Path, first_load, scopes: tuple[str, ...], verdict: tuple
) -> None:
    """The Enterprise Admin role's scopes come in other forms: a scope the mart cannot read makes
    the role's scopes unknown and the verdicts it might change NULL; `status` counts them."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    set_role_scopes(sim.world, "Enterprise Admin", (*_READS, *scopes))
    assert load(sim, wh, resources=["roles"]).exit_code == 0
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        found = con.execute(
            "select scopes_known, unreadable_scopes, can_wipe, can_reboot, can_lock, "
            "destructive_commands from marts.fleet_access where name = 'Ada Admin'"
        ).fetchone()
        (line,) = [line for line in morning_check(con) if "may wipe" in line]
    assert found == verdict
    # active users: Ada (this role), Victor (reads), Grace (no wipe), Uma (unknown role)
    wipe, unknown = (1 if verdict[2] else 0), (2 if not verdict[0] else 1)
    assert f"may wipe devices (marts.fleet_access): {wipe} of 4;" in line
    assert line.endswith(f"; scopes unknown for {unknown}")


class _DeletedMeanwhile(httpx.BaseTransport):
    """The network, where one user is deleted once its detail has answered 404: from then on the
    users list no longer names it (a deletion between the list read and the detail read)."""

    def __init__(self, detail: str, user_id: str) -> None:
        self.inner, self.detail, self.user_id = httpx.HTTPTransport(), detail, user_id
        self.deleted = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith(self.detail) and response.status_code == 404:
            self.deleted = True
        if self.deleted and request.url.path.endswith(USERS.path):
            response.read()
            body = json.loads(response.content)
            page = body["content"]
            page["results"] = [u for u in page["results"] if u["user_id"] != self.user_id]
            page["count"] -= 1
            return with_body(response, body)
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_user_deleted_meanwhile_keeps_its_profile_until_its_list_leaves_it_out(
    sim, tmp_path: Path, first_load
) -> None:
    """Gone means gone twice: the night's users list named Victor, so the run loads him as a
    current user and a 404 on his profile is a refused part, his profile kept (exit 6), even
    though the list read again leaves him out. The next night's list does not name him: his
    profile is not asked for and leaves the table."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    victor = next(u for u in sim.truth("users") if u["name"] == "Victor Viewer")
    gone = victor["legacy_user_id"]
    profiles = {p["id"] for p in sim.truth("user_profiles")}
    sim.set_faults([{"kind": "status", "status": 404, "route": f"/user/{gone}/*"}])
    deleted = _DeletedMeanwhile(f"/user/{gone}/", victor["user_id"])
    nightly = load(sim, wh, resources=["users"], client_options={"transport": deleted})
    assert deleted.deleted  # the 404 came, then the list was read again without the user
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert "1 user(s) skipped: GET /user/{id}/ answered 404" in nightly.unavailable["user_profiles"]
    with duckdb.connect(str(wh), read_only=True) as con:
        ids = {r[0] for r in con.execute("select id from esper.user_profiles").fetchall()}
    assert ids == profiles, "the profile of a user this night listed is kept"

    still_deleted = _DeletedMeanwhile(f"/user/{gone}/", victor["user_id"])
    still_deleted.deleted = True
    sim.reset_stats()
    after = load(sim, wh, resources=["users"], client_options={"transport": still_deleted})
    assert after.exit_code == Exit.OK, after.error
    assert not any(f"/user/{gone}/" in route for route in sim.stats()["routes"])
    with duckdb.connect(str(wh), read_only=True) as con:
        ids = {r[0] for r in con.execute("select id from esper.user_profiles").fetchall()}
    assert ids == profiles - {gone}
