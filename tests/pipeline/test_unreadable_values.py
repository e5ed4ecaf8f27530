"""A value the loader cannot read never ends the night (issue 32, item 4).

The simulator serves odd values (its `value` drift: a year-0 time, a word where a code was, 1.5
where a whole number belongs, "maybe" for a flag, a year-275760 expiry); the run loads every row,
each odd value as NULL, counts them per column in `_esper_runs.unreadable`, and `status` names
them ("3 values unreadable in devices.last_seen"). Keys and cursors are the exception: the run
ends, naming the column and the value, never as "StopIteration (no message)".
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from esper_warehouse.sources.esper.tables.credentials import (
    APNS_CERTIFICATES,
    PROVISIONING_PROFILES,
)

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import load


def _value(route: str, field: str, value: Any, ids: list[str] | None = None) -> dict[str, Any]:
    fault = {"kind": "drift", "variant": "value", "route": route, "field": field, "value": value}
    return {**fault, "ids": ids} if ids is not None else fault


def _status(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from esper_warehouse.pipelines import cli

    capsys.readouterr()
    assert cli.main(["status", "--warehouse", str(warehouse)]) == 0
    return capsys.readouterr().out


def _last_run(warehouse: Path) -> tuple[str, dict[str, int], str | None]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        status, unreadable, error = con.execute(
            "select status, unreadable, error from esper._esper_runs "
            "order by started_at desc limit 1"
        ).fetchone()  # type: ignore[misc]
    return status, orjson.loads(unreadable), error


def _column(warehouse: Path, table: str, column: str, key: str = "id") -> dict[str, Any]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return dict(con.execute(f"select {key}, {column} from esper.{table}").fetchall())


def test_odd_device_values_load_as_null_counted_and_the_next_night_is_clean(
    sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Timestamp, whole number, flag and vocabulary code of one table: all rows load, each odd
    value is NULL and counted; epoch milliseconds are a time, read as one."""
    wh = tmp_path / "warehouse.duckdb"
    truth = sim.truth("devices")
    never_seen = {d["id"] for d in truth if d.get("last_seen") is None}
    ids = sorted(d["id"] for d in truth if d["id"] not in never_seen)
    route = "/v2/devices/"
    sim.set_faults(
        [
            _value(route, "last_seen", "0000-00-00T00:00:00Z", ids[0:3]),
            _value(route, "drift_state", "high", ids[3:4]),
            _value(route, "drift_state", 1.5, ids[4:5]),  # never truncated to 1
            _value(route, "drift_severity", "critical", ids[5:6]),
            _value(route, "is_locked_down", "maybe", ids[6:7]),
            _value(route, "state", 1.5, ids[7:8]),  # a device state code (the vocabulary's)
            _value(route, "last_seen", 1790000000000, ids[8:9]),  # epoch ms: readable
        ]
    )

    result = load(sim, wh, resources=["devices"])

    assert result.exit_code == 0, result.error
    assert result.status == "ok"
    expected = {
        "devices.drift_severity": 1,
        "devices.drift_state": 2,
        "devices.is_locked_down": 1,
        "devices.last_seen": 3,
        "devices.state": 1,
    }
    assert result.unreadable == expected
    assert _last_run(wh) == ("ok", expected, None)
    last_seen = _column(wh, "devices", "last_seen")
    assert len(last_seen) == len(truth), "every device is loaded"
    assert {i for i, v in last_seen.items() if v is None} == never_seen | set(ids[0:3])
    assert last_seen[ids[8]] == datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)
    for column, odd in (
        ("drift_state", ids[3:5]),
        ("drift_severity", ids[5:6]),
        ("is_locked_down", ids[6:7]),
        ("state", ids[7:8]),
    ):
        values = _column(wh, "devices", column)
        assert [i for i in odd if values[i] is not None] == [], column
        assert any(v is not None for i, v in values.items() if i not in odd), column
    shown = _status(wh, capsys)
    assert "3 values unreadable in devices.last_seen" in shown
    assert "2 values unreadable in devices.drift_state" in shown
    assert "1 value unreadable in devices.drift_severity" in shown
    assert "1 value unreadable in devices.state" in shown

    sim.set_faults([])  # the next night reads the same devices, now served readable
    sim.advance(hours=2)
    result = load(sim, wh, resources=["devices"], full=True)

    assert result.exit_code == 0, result.error
    assert _last_run(wh) == ("ok", {}, None)
    last_seen = _column(wh, "devices", "last_seen")
    assert {i for i, v in last_seen.items() if v is None} == never_seen
    assert "unreadable" not in _status(wh, capsys)


def test_odd_credential_and_scope_values_through_the_command_line(
    sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Other tables, nested and per-parent: an APNs expiry of "next spring", a profile expiry in
    the year 275760 (NULL) beside one in epoch milliseconds (read), a scope type `ADMIN`."""
    from esper_warehouse.pipelines import cli

    wh = tmp_path / "warehouse.duckdb"
    profiles = sorted(p["id"] for p in sim.truth("provisioning_profiles"))
    scope_ids = [s["id"] for s in sim.truth("role_scopes")]  # a scope id may serve several roles
    scopes = sorted(i for i in scope_ids if scope_ids.count(i) == 1)
    sim.set_faults(
        [
            _value(APNS_CERTIFICATES.path, "meta.cert_expiry_on", "next spring"),
            _value(
                PROVISIONING_PROFILES.path,
                "expiration_date",
                "+275760-09-13T00:00:00Z",
                profiles[:1],
            ),
            _value(PROVISIONING_PROFILES.path, "expiration_date", 1790000000000, profiles[1:2]),
            _value("/authz2/v1/roles/*/scopes", "scope_type", "ADMIN", scopes[:2]),
        ]
    )
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    tables = "apns_certificates,provisioning_profiles,role_scopes"
    argv = ["run", "--warehouse", str(wh), "--no-models", "--resources", tables]

    code = cli.main(argv)

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "2 values unreadable in role_scopes.scope_type (loaded as NULL)" in out  # the summary
    expected = {
        "apns_certificates.meta__cert_expiry_on": 1,
        "provisioning_profiles.expiration_date": 1,
        "role_scopes.scope_type": 2,
    }
    assert _last_run(wh) == ("ok", expected, None)
    assert "apns_certificates.meta__cert_expiry_on: 'next spring' cannot be read" in err
    assert list(_column(wh, "apns_certificates", "meta__cert_expiry_on").values()) == [None]
    expiry = _column(wh, "provisioning_profiles", "expiration_date")
    assert expiry == {
        profiles[0]: None,
        profiles[1]: datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC),
    }
    with duckdb.connect(str(wh), read_only=True) as con:
        scope_types = con.execute("select id, scope_type from esper.role_scopes").fetchall()
    assert len(scope_types) == len(scope_ids)
    assert sorted(i for i, t in scope_types if t is None) == scopes[:2]
    shown = _status(wh, capsys)
    assert "1 value unreadable in apns_certificates.meta__cert_expiry_on" in shown
    assert "1 value unreadable in provisioning_profiles.expiration_date" in shown
    assert "2 values unreadable in role_scopes.scope_type" in shown


@pytest.mark.parametrize(
    ("table", "route", "field", "named"),
    [
        (
            "heartbeats",
            "/v2/heartbeat/",
            "timestamp",
            "heartbeats.timestamp: 'soon' cannot be read",
        ),
        ("devices", "/v2/devices/", "updated_at", "updated_at is the list's cursor"),
    ],
    ids=["key", "cursor"],
)
def test_an_unreadable_key_or_cursor_ends_the_run_naming_it_and_the_next_night_loads(
    sim, tmp_path: Path, table: str, route: str, field: str, named: str
) -> None:
    """A key or cursor is never NULL: the run ends with exit 3 naming the column and the value
    (not `StopIteration (no message)`); the next night, served a readable one, loads."""
    wh = tmp_path / "warehouse.duckdb"
    sim.set_faults([_value(route, field, "soon")])

    result = load(sim, wh, resources=[table])

    assert result.exit_code == 3
    assert result.error is not None
    assert named in result.error and "'soon'" in result.error
    assert "StopIteration" not in result.error
    # a first run that loaded nothing leaves no warehouse behind (docs/troubleshooting.md)
    assert not wh.exists()

    sim.set_faults([])
    result = load(sim, wh, resources=[table])

    assert result.exit_code == 0, result.error
    assert _column(wh, table, "count(*)", key="count(*)")


def test_an_error_raised_inside_dlts_iteration_reaches_the_user_with_its_message(
    sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlt's pipes leave an empty `StopIteration` in the context of a resource's error; the
    user reads the error itself (it once said `StopIteration (no message)`)."""
    from esper_warehouse.sources.esper.tables import access

    def broken(*args: object) -> list[dict]:
        raise ValueError("scope 7 has no name")

    monkeypatch.setattr(access, "_scope_rows", broken)

    result = load(sim, tmp_path / "warehouse.duckdb", resources=["role_scopes"])

    assert result.exit_code == 1
    assert result.error == "ValueError: scope 7 has no name"
