"""fleet_compliance, fleet_compliance_daily and stale_devices on the compliance fixture fleet."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from tests.sql import scenarios
from tests.sql.conftest import query_fn
from tests.sql.rawdata import make_warehouse

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet(compliance_wh: Path) -> dict[str, dict]:
    rows = query_fn(compliance_wh)("select * from marts.fleet_compliance")
    return {row["device_id"]: row for row in rows}


def test_one_row_per_current_device_and_removed_device_excluded(fleet):
    assert len(fleet) == 16
    assert "a-removed" not in fleet


def test_verdict_counts(fleet):
    verdicts = {}
    for row in fleet.values():
        verdicts.setdefault(row["verdict"], set()).add(row["device_id"])
    assert verdicts["compliant"] == {"a-ok", "a-os-13", "a-os-13.0.1", "i-ok", "a-stale", "a-tz"}
    assert verdicts["unverified"] == {"a-never", "a-31d", "a-no-apps"}
    assert verdicts["non_compliant"] == {
        "a-os-12",
        "a-bp-drift",
        "a-bp-old",
        "a-patch-old",
        "a-no-chrome",
        "a-old-chrome",
        "a-old-agent",
    }


def test_compliant_device_has_every_check_true_and_no_reasons(fleet):
    row = fleet["a-ok"]
    assert row["is_os_current"] is True
    assert row["is_security_patch_current"] is True
    assert row["security_patch_age_days"] == (date(2026, 10, 31) - date(2026, 9, 5)).days
    assert row["is_blueprint_in_sync"] is True
    assert row["has_required_apps"] is True
    assert row["is_agent_current"] is True
    assert row["reasons"] == []
    assert row["last_seen_bucket"] == "online"
    assert row["hours_since_seen"] == pytest.approx(0.5)
    assert row["group_path"] == "All devices/Stores"
    assert row["assigned_blueprint_name"] == "Store tablets"


def test_never_seen_device_is_unverified(fleet):
    row = fleet["a-never"]
    assert row["last_seen_at"] is None
    assert row["last_seen_bucket"] == "never_seen"
    assert row["verdict"] == "unverified"
    assert row["reasons"] == ["never seen"]


def test_device_seen_31_days_ago_is_unverified_not_compliant(fleet):
    row = fleet["a-31d"]
    assert row["hours_since_seen"] == pytest.approx(744)
    assert row["last_seen_bucket"] == "missing"
    assert row["is_seen_recently"] is False
    # every check passes on its old attributes, and still it is not compliant
    assert row["is_os_current"] and row["has_required_apps"] and row["is_blueprint_in_sync"]
    assert row["verdict"] == "unverified"
    assert row["reasons"] == ["not seen for 31 days (missing)"]


def test_stale_device_is_still_judged(fleet):
    assert fleet["a-stale"]["last_seen_bucket"] == "stale"
    assert fleet["a-stale"]["verdict"] == "compliant"


def test_os_versions_compare_as_numbers(fleet):
    # minimum 13: "13" and "13.0.1" pass, "12.1" fails
    assert fleet["a-os-13"]["is_os_current"] is True
    assert fleet["a-os-13.0.1"]["is_os_current"] is True
    assert fleet["a-os-12"]["is_os_current"] is False
    assert fleet["a-os-12"]["reasons"] == ["OS 12.1 below minimum 13 for ANDROID"]


def test_blueprint_assigned_but_not_current_is_drift(fleet):
    row = fleet["a-bp-drift"]
    assert row["is_blueprint_in_sync"] is False
    # blueprints by name; the ids stay in their own columns, the code is the grouping key
    assert row["reasons"] == ["blueprint Kiosk: assigned, but Store tablets is applied"]
    assert row["reason_codes"] == ["blueprint_drift"]
    assert (row["assigned_blueprint_id"], row["current_blueprint_id"]) == ("bp-2", "bp-1")
    old = fleet["a-bp-old"]
    assert old["latest_blueprint_version_id"] == "bpv-2"
    assert old["is_blueprint_in_sync"] is False
    assert old["reasons"] == ["blueprint Store tablets: at version 1, not the latest 2"]
    assert old["reason_codes"] == ["blueprint_drift"]
    (detail,) = old["reason_details"]
    assert (detail["subject_id"], detail["subject_name"]) == ("bp-1", "Store tablets")
    assert (detail["observed"], detail["target"]) == ("1", "2")


def test_security_patch_age(fleet):
    row = fleet["a-patch-old"]
    assert row["security_patch_age_days"] == 152
    assert row["is_security_patch_current"] is False
    assert row["reasons"] == ["security patch 2026-06-01 is 152 days old (maximum 90)"]
    assert row["reason_codes"] == ["patch_too_old"]
    (detail,) = row["reason_details"]
    assert (detail["observed"], detail["target"]) == ("2026-06-01", "90")


def test_required_apps(fleet):
    assert fleet["a-no-chrome"]["has_required_apps"] is False
    assert fleet["a-no-chrome"]["reasons"] == ["required app com.android.chrome missing"]
    assert fleet["a-no-chrome"]["reason_codes"] == ["app_missing"]
    assert fleet["a-old-chrome"]["reason_codes"] == ["app_outdated"]
    assert fleet["a-old-chrome"]["reasons"] == [
        "required app chrome (com.android.chrome) 119.0.6045 below minimum 120.0"
    ]
    # a device that never reported its apps cannot be judged on them
    assert fleet["a-no-apps"]["has_required_apps"] is None
    assert fleet["a-no-apps"]["reasons"] == ["app inventory not reported"]


def test_agent_version(fleet):
    assert fleet["a-old-agent"]["is_agent_current"] is False
    assert fleet["a-old-agent"]["reasons"] == ["Esper agent 6.9.9 below minimum 7.0"]


def test_platform_without_targets_leaves_checks_unevaluated(fleet):
    row = fleet["i-ok"]
    assert row["platform"] == "APPLE"
    assert row["last_seen_bucket"] == "active"  # its own last_seen, no heartbeat
    assert row["is_os_current"] is True
    assert row["is_security_patch_current"] is None
    assert row["is_agent_current"] is None
    assert row["is_blueprint_in_sync"] is None
    assert row["has_required_apps"] is True
    assert row["verdict"] == "compliant"


def test_removed_device_is_flagged_in_intermediate(compliance_wh):
    rows = query_fn(compliance_wh)(
        "select device_id from intermediate.int_devices_current where is_removed"
    )
    assert rows == [{"device_id": "a-removed"}]


def test_daily_trend_from_history(compliance_wh):
    q = query_fn(compliance_wh)
    tz = q(
        "select day, compliant_devices, non_compliant_devices from marts.fleet_compliance_daily "
        "where group_id = 'g-tz' order by day"
    )
    assert len(tz) == 31  # 2026-10-01 (first load) .. 2026-10-31 (as_of)
    by_day = {r["day"]: (r["compliant_devices"], r["non_compliant_devices"]) for r in tz}
    # os 12 until 2026-10-14 23:30 UTC-5 = 2026-10-15 04:30 UTC
    assert by_day[date(2026, 10, 1)] == (0, 1)
    assert by_day[date(2026, 10, 14)] == (0, 1)
    assert by_day[date(2026, 10, 15)] == (1, 0)
    assert by_day[date(2026, 10, 31)] == (1, 0)
    # the removed device counts until its last activity (heartbeat 2026-10-10), then leaves
    removed = q(
        "select min(day) as first, max(day) as last, max(devices) as devices "
        "from marts.fleet_compliance_daily where group_id = 'g-removed'"
    )
    assert removed == [{"first": date(2026, 10, 1), "last": date(2026, 10, 10), "devices": 1}]


def test_daily_as_of_day_equals_fleet_compliance(compliance_wh):
    q = query_fn(compliance_wh)
    daily = q(
        "select sum(devices) as devices, sum(compliant_devices) as compliant, "
        "sum(non_compliant_devices) as non_compliant, sum(unverified_devices) as unverified "
        "from marts.fleet_compliance_daily where day = date '2026-10-31'"
    )
    assert daily == [{"devices": 16, "compliant": 6, "non_compliant": 7, "unverified": 3}]
    rate = q(
        "select compliance_rate, verified_compliance_rate from marts.fleet_compliance_daily "
        "where day = date '2026-10-31' and group_id = 'g-stores' and platform = 'ANDROID'"
    )
    # g-stores Android: 14 devices, 4 compliant, 7 non_compliant, 3 unverified
    assert rate == [{"compliance_rate": pytest.approx(4 / 14), "verified_compliance_rate": 4 / 11}]


def test_stale_devices(compliance_wh):
    rows = query_fn(compliance_wh)(
        "select device_id, last_seen_bucket, days_since_seen, group_path "
        "from marts.stale_devices order by device_id"
    )
    assert rows == [
        {
            "device_id": "a-31d",
            "last_seen_bucket": "missing",
            "days_since_seen": 31,
            "group_path": "All devices/Stores",
        },
        {
            "device_id": "a-never",
            "last_seen_bucket": "never_seen",
            "days_since_seen": None,
            "group_path": "All devices/Stores",
        },
        {
            "device_id": "a-stale",
            "last_seen_bucket": "stale",
            "days_since_seen": 3,
            "group_path": "All devices/Stores",
        },
    ]


def test_utc_days_whatever_the_session_time_zone(tmp_path):
    """Built by a process in America/Chicago (UTC-5 in October), days are still UTC days."""
    path = make_warehouse(tmp_path / "esper.duckdb", scenarios.compliance())
    env = {**os.environ, "TZ": "America/Chicago"}
    done = subprocess.run(
        [sys.executable, "-m", "esper_warehouse.pipelines.cli", "models", "--warehouse", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = query_fn(path)(
        "select day, compliant_devices from marts.fleet_compliance_daily "
        "where group_id = 'g-tz' and day in ('2026-10-14', '2026-10-15') order by day"
    )
    assert rows == [
        {"day": date(2026, 10, 14), "compliant_devices": 0},
        {"day": date(2026, 10, 15), "compliant_devices": 1},
    ]


def test_json_and_timestamps_as_text_give_the_same_marts(tmp_path, compliance_wh):
    from esper_warehouse.pipelines.build.models import build_models

    path = make_warehouse(tmp_path / "text.duckdb", scenarios.compliance(), as_text=True)
    build_models(path)
    sql = "select * exclude (as_of) from marts.fleet_compliance order by device_id"
    assert query_fn(path)(sql) == query_fn(compliance_wh)(sql)
