"""The run's "now" (pipelines/run/clock.py): the API's `Date`, unless the data and this machine's
clock both contradict it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from esper_warehouse.pipelines.run.clock import TOLERANCE, trusted_as_of

API = datetime(2026, 10, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_a_date_ahead_of_the_data_and_far_from_the_machine_is_not_used() -> None:
    data, wall = API - 72 * HOUR, API + 60 * 24 * HOUR  # the simulator: months from the machine
    as_of, why = trusted_as_of(API, data, wall)
    assert as_of == data and why and "runs 72 h ahead of its newest data" in why


def test_a_quiet_fleet_under_a_right_clock_keeps_the_api_s_date() -> None:
    """No device has checked in for days, but the machine agrees with the API."""
    assert trusted_as_of(API, API - 96 * HOUR, API + HOUR) == (API, None)


def test_a_wrong_machine_clock_alone_changes_nothing() -> None:
    assert trusted_as_of(API, API - HOUR, API - 365 * 24 * HOUR) == (API, None)


def test_a_date_behind_its_data_or_within_the_tolerance_is_used() -> None:
    far = API + 365 * 24 * HOUR
    assert trusted_as_of(API, API + 5 * HOUR, far) == (API, None)  # behind: cuts nothing off
    assert trusted_as_of(API, API - TOLERANCE, far) == (API, None)
    assert trusted_as_of(API, None, far) == (API, None)  # no data read: nothing contradicts it
    assert trusted_as_of(None, API, far) == (None, None)
