"""Credentials that expire: the raw tables equal the simulator's, and `marts.credential_expiry`
says which are expired or expiring, against the simulator's truth."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views.status import expiring_credentials
from esper_warehouse.simulator.routes.credentials import VPP_KEY_PREFIX, serve_expiry, set_expiry
from esper_warehouse.sources.esper.tables.credentials import VPP_TOKENS
from esper_warehouse.sources.esper.times import us_date

from tests.pipeline.helpers import load
from tests.routes import glob

TABLES = (
    "apns_certificates",
    "dep_tokens",
    "vpp_tokens",
    "provisioning_profiles",
    "provisioning_profile_versions",
)


# The simulator's credentials (kind, days left, status): a push certificate with 20 days left,
# an enrolment token expired 3 days ago and one with 200 days, profiles with 90 and 12 days, and
# an app licence token the API declares no expiry for.
DEFAULTS = [
    ("apns_certificate", 20, "expiring"),
    ("dep_token", -3, "expired"),
    ("dep_token", 200, "ok"),
    ("provisioning_profile", 12, "expiring"),
    ("provisioning_profile", 90, "ok"),
    ("vpp_token", None, "unknown"),
]


def _verdicts(wh: Path) -> list[tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(
            "select credential_kind, credential_name, days_left, status from "
            "marts.credential_expiry order by credential_kind, days_left"
        ).fetchall()


def test_credentials_load_as_served_and_the_mart_reads_their_expiry(
    sim, shared_modelled_load
) -> None:
    """The shared first load and the models built on it, read only."""
    wh = shared_modelled_load.warehouse
    assert shared_modelled_load.result.exit_code == 0
    with duckdb.connect(str(wh), read_only=True) as con:
        for table in TABLES:
            ids = {r[0] for r in con.execute(f"select id from esper.{table}").fetchall()}
            assert ids, table
            assert ids == {r["id"] for r in sim.truth(table)}, table
    assert [(kind, days, status) for kind, _name, days, status in _verdicts(wh)] == DEFAULTS
    # each profile's versions, the current one first (newest expiry), as the API orders them
    with duckdb.connect(str(wh), read_only=True) as con:
        versions = con.execute(
            "select profile_id, profile_version_id, expires_at from "
            "staging.stg_esper__provisioning_profile_versions order by profile_id, expires_at desc"
        ).fetchall()
        current = dict(
            con.execute(
                "select profile_id, profile_version_id from staging.stg_esper__provisioning_profiles"
            ).fetchall()
        )
    served = sim.truth("provisioning_profile_versions")
    assert {(p, v) for p, v, _e in versions} == {(v["profile_id"], v["id"]) for v in served}
    newest = {}
    for profile, version, _expires in versions:
        newest.setdefault(profile, version)
    assert newest == current


def test_secrets_the_credential_routes_serve_are_not_kept(sim, tmp_path: Path, first_load) -> None:
    """The VPP token's `key` is the token itself; a profile's `download_url` is a signed link."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    assert [v["key"].startswith(VPP_KEY_PREFIX) for v in sim.truth("vpp_tokens")] == [True]
    assert all("sig=" in v["download_url"] for v in sim.truth("provisioning_profile_versions"))
    with duckdb.connect(str(wh), read_only=True) as con:
        columns = {
            name
            for (name,) in con.execute(
                "select column_name from information_schema.columns where table_name in "
                "('vpp_tokens', 'provisioning_profiles', 'provisioning_profile_versions')"
            ).fetchall()
        }
    assert columns and not columns & {"key", "download_url"}
    stored = wh.read_bytes()
    assert VPP_KEY_PREFIX.encode() not in stored
    assert b"sig=secret" not in stored and b"downloads.example.invalid" not in stored


def test_certificates_expiring_in_10_40_and_minus_1_days(sim, tmp_path: Path, first_load) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    set_expiry(sim.world, "apns_certificates", [10, 40, -1])
    assert load(sim, wh, resources=["apns_certificates"]).exit_code == 0
    build_models(wh)
    names = {r["apple_id"] for r in sim.truth("apns_certificates")}
    found = [v for v in _verdicts(wh) if v[0] == "apns_certificate"]
    assert {name for _k, name, _d, _s in found} == names
    assert [(days, status) for _k, _n, days, status in found] == [
        (-1, "expired"),
        (10, "expiring"),
        (40, "ok"),
    ]
    with duckdb.connect(str(wh), read_only=True) as con:  # what `esper-warehouse status` prints
        shown = "\n".join(expiring_credentials(con))
    expired, expiring, fine = (n for _k, n, _d, _s in found)
    assert f"expired   apns_certificate      {expired}" in shown
    assert f"expiring  apns_certificate      {expiring}" in shown
    assert fine not in shown


def test_a_tenant_without_apple_services_loads_everything_else(
    sim, tmp_path: Path, first_load
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.set_faults([{"kind": "status", "status": 404, "route": "/tenant/v0/*"}])
    sim.advance(hours=24)
    # the credential tables; a whole tenant with one route refused is test_partial_tenant's
    nightly = load(sim, wh, resources=list(TABLES))
    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert set(nightly.unavailable) == {"apns_certificates", "dep_tokens", "vpp_tokens"}
    build_models(wh)  # the earlier lists are kept: the mart still reads them
    assert {v[0] for v in _verdicts(wh)} == {
        "apns_certificate",
        "dep_token",
        "provisioning_profile",
        "vpp_token",
    }


def test_partial_nightlies_move_now_and_the_credentials_days(
    sim, tmp_path: Path, first_load
) -> None:
    """A partial run is a loaded run: two partial nightlies move the marts' "now" two days, so
    the certificate that had 20 days has 18 and the token expired 3 days ago is 5 days gone.
    (Two nights show the days adding up: what is asserted is that each partial night counts,
    not how many nights there are.)"""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.truth("dep_tokens")  # this simulator fixes its expiry dates now, as the copied load's did
    sim.set_faults([{"kind": "status", "status": 403, "route": glob(VPP_TOKENS) + "*"}])
    for _night in range(2):
        sim.advance(hours=24)
        nightly = load(sim, wh, resources=["apns_certificates", "dep_tokens", "vpp_tokens"])
        assert nightly.exit_code == Exit.PARTIAL, nightly.error
        assert set(nightly.unavailable) == {"vpp_tokens"}
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        as_of, runs = con.execute(
            "select as_of, loaded_run_count from intermediate.int_as_of"
        ).fetchone()
        shown = "\n".join(expiring_credentials(con))
    assert (as_of, runs) == (nightly.as_of, 3)
    assert [(kind, days, status) for kind, _name, days, status in _verdicts(wh)][:3] == [
        ("apns_certificate", 18, "expiring"),
        ("dep_token", -5, "expired"),
        ("dep_token", 198, "ok"),
    ]
    assert "(in 18 days)" in shown and "(5 days ago)" in shown


def test_a_tenant_partial_from_its_first_load_reads_at_the_api_time(
    sim, tmp_path: Path, first_load
) -> None:
    """No ok run at all, only a partial one: "now" is that run's API time, not this machine's
    clock (which is weeks past the simulator's)."""
    wh = tmp_path / "warehouse.duckdb"
    first = first_load(wh)
    with duckdb.connect(str(wh)) as con:
        con.execute("update esper._esper_runs set status = 'partial'")
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        as_of = con.execute("select as_of from intermediate.int_as_of").fetchone()[0]
        stale = con.execute(
            "select count(*) filter (where last_seen_bucket = 'missing'), count(*) "
            "from marts.fleet_compliance"
        ).fetchone()
    assert as_of == first.as_of
    assert stale[0] < stale[1] / 2, stale


CREDENTIALS = ("apns_certificates", "dep_tokens", "provisioning_profiles")


@pytest.mark.parametrize("form", ["us", "epoch_s", "epoch_ms"])
def test_expiries_served_as_us_dates_are_read(sim, tmp_path: Path, first_load, form: str) -> None:
    """Every expiry served month first (`10/02/2026`), or as epoch seconds or milliseconds: the
    token expired 3 days ago is expired, and listed by `status`, not `unknown` and left out."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    for kind in CREDENTIALS:
        serve_expiry(sim.world, kind, form)
    served = str(sim.truth("dep_tokens")[0]["meta"]["token_expiry_on"])
    assert served.count("/") == 2 if form == "us" else served.isdigit(), served
    nightly = load(sim, wh, resources=list(CREDENTIALS))
    assert nightly.exit_code == 0, nightly.error
    build_models(wh)
    assert [(kind, days, status) for kind, _name, days, status in _verdicts(wh)] == DEFAULTS
    with duckdb.connect(str(wh), read_only=True) as con:
        shown = "\n".join(expiring_credentials(con))
    assert "expired   dep_token             Apple Business Manager 1" in shown
    assert "(3 days ago)" in shown


def test_an_expiry_served_in_words_loads_as_null_counted_and_shows_unreadable(
    sim, tmp_path: Path, first_load
) -> None:
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    serve_expiry(sim.world, "dep_tokens", "words")
    nightly = load(sim, wh, resources=["dep_tokens"])
    assert nightly.exit_code == 0, nightly.error
    assert nightly.unreadable.get("dep_tokens.token_expires_at"), nightly.unreadable
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        statuses = {
            status
            for (status,) in con.execute(
                "select status from marts.credential_expiry where credential_kind = 'dep_token'"
            ).fetchall()
        }
    assert statuses == {"unreadable"}, statuses


def test_us_dates_read_month_first_and_an_impossible_one_stays_as_served() -> None:
    assert us_date("10/02/2026") == "2026-10-02T00:00:00Z"  # 2 October, not 10 February
    assert us_date(" 1/2/2026 13:05 ") == "2026-01-02T13:05:00Z"
    assert us_date("10/02/2026 01:02:03") == "2026-10-02T01:02:03Z"
    # not US dates: left for parse_time to read (ISO, epoch) or to call unreadable
    for other in ("25/02/2026", "2026-10-02", "next spring", 1790000000, None):
        assert us_date(other) == other


def test_an_expiry_that_cannot_be_read_is_named_unreadable(sim, tmp_path: Path, first_load) -> None:
    """The loader reads what it can and loads the rest as NULL (counted); the served text stays,
    so the mart and `status` say `unreadable`, never `unknown`, and never drop it."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    with duckdb.connect(str(wh)) as con:  # as the loader leaves a value it cannot read
        con.execute(
            "update esper.dep_tokens set token_expires_at = null, "
            "meta__token_expiry_on = 'next spring' where token_name = 'Apple Business Manager 2'"
        )
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        row = con.execute(
            "select expires_at, expires_as_served, days_left, status from marts.credential_expiry "
            "where credential_name = 'Apple Business Manager 2'"
        ).fetchone()
        shown = "\n".join(expiring_credentials(con))
    assert row == (None, "next spring", None, "unreadable")
    assert "unreadable dep_token             Apple Business Manager 2  expiry served as " in shown
    assert "'next spring'" in shown


@pytest.mark.parametrize(
    ("table", "kind", "shown"),
    [
        ("provisioning_profiles", "provisioning_profile", (12, "expiring")),
        ("dep_tokens", "dep_token", (-3, "expired")),
    ],
)
def test_one_id_listed_twice_shows_the_copy_that_expires_first(
    sim, tmp_path: Path, first_load, table: str, kind: str, shown: tuple
) -> None:
    """Two records with one id (the profiles' 90 and 12 days, the tokens' -3 and 200): the run is
    complete (the second copy is not "missing"), and the mart shows the earlier expiry."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    serve_expiry(sim.world, table, one_id=True)
    assert len({r["id"] for r in sim.truth(table)}) == 1 < len(sim.truth(table))
    resources = [table, *(["provisioning_profile_versions"] if "profile" in table else [])]
    nightly = load(sim, wh, resources=resources)
    assert nightly.exit_code == 0, nightly.error
    assert all(r["ok"] and not r["missing"] for r in nightly.reconciliation)
    build_models(wh)
    found = [(days, status) for k, _name, days, status in _verdicts(wh) if k == kind]
    assert found == [shown]
