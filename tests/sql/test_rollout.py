"""app_rollout and app_rollout_current on the rollout fixture fleet (see scenarios.rollout)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.sql import scenarios
from tests.sql.conftest import _built, query_fn
from tests.sql.scenarios import app

PKG = "io.esper.remoteviewer"


@pytest.fixture(scope="module")
def daily(rollout_wh) -> dict[tuple[date, str], dict]:
    rows = query_fn(rollout_wh)(
        "select * from marts.app_rollout where platform = 'ANDROID' and package_name = ?", [PKG]
    )
    return {(row["day"], row["version_name"]): row for row in rows}


def counts(daily, day: date) -> dict[str, int]:
    return {v: row["devices_on_version"] for (d, v), row in daily.items() if d == day}


def test_devices_per_version_per_day(daily):
    assert counts(daily, date(2026, 10, 20)) == {"14.9": 2}  # r1, r2 (14.10 not yet seen)
    assert counts(daily, date(2026, 10, 24)) == {"14.9": 2, "14.10": 1}
    assert counts(daily, date(2026, 10, 25)) == {"14.9": 1, "14.10": 2}  # r2 updated 10:00Z


def test_rolled_back_device_counts_on_the_version_it_went_back_to(daily):
    assert counts(daily, date(2026, 10, 26)) == {"14.9": 1, "14.10": 3}
    assert counts(daily, date(2026, 10, 27)) == {"14.9": 2, "14.10": 2}  # r3 back to 14.9
    assert counts(daily, date(2026, 10, 31)) == {"14.9": 2, "14.10": 2}


def test_share_is_of_reporting_devices_and_non_reporting_shown_apart(daily):
    # 10-25: r5's first report is 23:30 UTC-5, i.e. 10-26 UTC -> still not reporting on 10-25
    row = daily[(date(2026, 10, 25), "14.10")]
    assert (row["reporting_devices"], row["not_reporting_devices"], row["fleet_devices"]) == (
        3,
        2,
        5,
    )
    assert row["share_of_reporting"] == pytest.approx(2 / 3)
    row = daily[(date(2026, 10, 26), "14.10")]
    assert (row["reporting_devices"], row["not_reporting_devices"]) == (4, 1)
    assert row["share_of_reporting"] == pytest.approx(3 / 4)


def test_versions_order_as_numbers(daily):
    assert daily[(date(2026, 10, 31), "14.10")]["is_highest_version"] is True
    assert daily[(date(2026, 10, 31), "14.9")]["is_highest_version"] is False
    # a version's rows start on the day it first appears
    assert min(d for (d, v) in daily if v == "14.10") == date(2026, 10, 22)


def test_current_rollout_state(rollout_wh):
    rows = query_fn(rollout_wh)(
        "select * exclude (as_of, data_as_of, age_note) from marts.app_rollout_current "
        "order by platform, package_name"
    )
    assert rows == [
        {
            "platform": "ANDROID",
            "package_name": PKG,
            "app_name": "remoteviewer",
            "latest_version": "14.10",
            "devices_with_app": 4,
            "devices_on_latest": 2,
            "devices_on_older": 2,
            "reporting_devices": 4,
            "not_reporting_devices": 1,
            "share_on_latest": 0.5,
            "share_with_app": 1.0,
            "version_count": 2,
            "versions": [
                {"version_name": "14.10", "devices": 2},
                {"version_name": "14.9", "devices": 2},
            ],
            "required_min_version": "3.0",
            "devices_below_required": 0,
            "devices_missing_required": 0,
        },
        {
            "platform": "APPLE",
            "package_name": "com.microsoft.Outlook",
            "app_name": "Outlook",
            "latest_version": "4.2405.0",
            "devices_with_app": 1,
            "devices_on_latest": 1,
            "devices_on_older": 0,
            "reporting_devices": 1,
            "not_reporting_devices": 0,
            "share_on_latest": 1.0,
            "share_with_app": 1.0,
            "version_count": 1,
            "versions": [{"version_name": "4.2405.0", "devices": 1}],
            "required_min_version": "4.2400",
            "devices_below_required": 0,
            "devices_missing_required": 0,
        },
    ]


def test_current_agrees_with_the_as_of_day(rollout_wh):
    q = query_fn(rollout_wh)
    per_day = q(
        "select platform, package_name, version_name, devices_on_version as devices "
        "from marts.app_rollout where day = date '2026-10-31' order by all"
    )
    current = q(
        "select platform, package_name, v.version_name, v.devices "
        "from marts.app_rollout_current, unnest(versions) as u(v) order by all"
    )
    assert per_day == current


def test_latest_app_version_per_device(rollout_wh):
    rows = query_fn(rollout_wh)(
        "select device_id, version_name from intermediate.int_device_app_latest "
        "where package_name = ? order by device_id",
        [PKG],
    )
    assert rows == [
        {"device_id": "r1", "version_name": "14.9"},
        {"device_id": "r2", "version_name": "14.10"},
        {"device_id": "r3", "version_name": "14.9"},
        {"device_id": "r5", "version_name": "14.10"},
    ]


REQUIRED_FROM_LATEST = """
    select latest.*
    from intermediate.int_device_app_latest as latest
    where latest.package_name in (select package_name from staging.stg_seeds__required_apps)
"""


def test_required_apps_now_are_the_latest_rows_of_the_required_packages(rollout_wh):
    q = query_fn(rollout_wh)
    required = "select * from intermediate.int_device_required_apps"
    # r1, r2, r3 (rolled back), r5 on the remote viewer, plus the other required packages
    assert q(f"select count(*) as n from ({required})")[0]["n"] >= 4
    assert q(f"select count(*) as n from ({required} except all {REQUIRED_FROM_LATEST})") == [
        {"n": 0}
    ]
    assert q(f"select count(*) as n from ({REQUIRED_FROM_LATEST} except all {required})") == [
        {"n": 0}
    ]


def test_each_versions_adoption_with_a_rollback(rollout_wh):
    """marts.app_version_rollout on the same fleet, worked out by hand (installed_at is each
    record's valid_from here): the current devices with the app are r1 (14.9), r2 (14.10), r3
    (back on 14.9) and r5 (14.10); r3 counts as having reached 14.9 when it got 14.10 (10-22)."""
    rows = query_fn(rollout_wh)(
        "select version_name, is_latest_version, devices_on_version, devices_at_or_above, "
        "devices_on_older, devices_with_app, days_to_50_pct, days_to_90_pct, "
        "p50_minutes_to_install, devices_installed from marts.app_version_rollout "
        "where platform = 'ANDROID' and package_name = ? order by version_key",
        [PKG],
    )
    assert rows == [
        {
            "version_name": "14.9",
            "is_latest_version": False,
            "devices_on_version": 2,  # r1, r3
            "devices_at_or_above": 4,
            "devices_on_older": 0,
            "devices_with_app": 4,
            # adopted 10-18 (r1, r2), 10-22 (r3), 10-26 04:30Z (r5); first seen 10-18
            "days_to_50_pct": 0.0,
            "days_to_90_pct": 8.2,  # 8 d 4.5 h
            "p50_minutes_to_install": 0.0,  # r1, r2 at 10-18; r3 at 10-27 (its second 14.9)
            "devices_installed": 3,
        },
        {
            "version_name": "14.10",
            "is_latest_version": True,
            "devices_on_version": 2,  # r2, r5
            "devices_at_or_above": 2,
            "devices_on_older": 2,
            "devices_with_app": 4,
            # adopted 10-22 (r3), 10-25 10:00Z (r2), 10-26 04:30Z (r5), never (r1)
            "days_to_50_pct": 3.4,
            "days_to_90_pct": None,
            "p50_minutes_to_install": 4920.0,  # 0, 3 d 10 h, 4 d 4.5 h
            "devices_installed": 3,
        },
    ]


@pytest.fixture(scope="module")
def twin_wh(tmp_path_factory) -> Path:
    """The rollout fleet plus com.example.twin with two records open at once: on r1 2.0 from
    10-20 and 1.5 from 10-24 (the later is current), on r2 3.0 and 3.1 both from 10-20 (the
    higher is current)."""
    data = scenarios.rollout()
    twin = "com.example.twin"
    data["device_apps"] += [
        app("r1", twin, "2.0", "2026-10-20T00:00:00+00:00"),
        app("r1", twin, "1.5", "2026-10-24T00:00:00+00:00"),
        {**app("r2", twin, "3.0", "2026-10-20T00:00:00+00:00"), "id": "r2:twin:3.0"},
        {**app("r2", twin, "3.1", "2026-10-20T00:00:00+00:00"), "id": "r2:twin:3.1"},
    ]
    return _built(tmp_path_factory, "rollout_twin", data)


def test_version_counts_of_now_are_the_latest_rows_of_the_current_devices(twin_wh):
    """app_version_rollout finds each device's current version itself (from the app records it
    has already read); it must be int_device_app_latest's, the one definition of "now"."""
    q = query_fn(twin_wh)
    from_latest = q(
        "select devices.platform, latest.package_name, latest.version_name, count(*) as devices "
        "from intermediate.int_device_app_latest as latest "
        "inner join intermediate.int_devices_current as devices "
        "on devices.device_id = latest.device_id and not devices.is_removed "
        "group by all order by all"
    )
    from_mart = q(
        "select platform, package_name, version_name, devices_on_version as devices "
        "from marts.app_version_rollout where devices_on_version > 0 order by all"
    )
    twin = [row for row in from_mart if row["package_name"] == "com.example.twin"]
    assert [(row["version_name"], row["devices"]) for row in twin] == [("1.5", 1), ("3.1", 1)]
    assert from_mart == from_latest
