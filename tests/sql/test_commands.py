"""command_rollout and operation_rollout on the commands fixture (see scenarios.commands)."""

from __future__ import annotations

import pytest

from tests.sql.conftest import query_fn


@pytest.fixture(scope="module")
def commands(commands_wh) -> dict[str, dict]:
    rows = query_fn(commands_wh)("select * from marts.command_rollout")
    return {row["command_request_id"]: row for row in rows}


@pytest.fixture(scope="module")
def operations(commands_wh) -> dict[str, dict]:
    rows = query_fn(commands_wh)("select * from marts.operation_rollout")
    return {row["operation_id"]: row for row in rows}


def test_finished_command(commands):
    row = commands["req-done"]
    assert row["requested_device_count"] == 4
    assert row["target_devices"] == 4
    assert (row["success_devices"], row["failure_devices"], row["timeout_devices"]) == (2, 1, 1)
    assert row["success_rate"] == 0.5
    assert row["failure_rate"] == 0.25
    assert row["timeout_rate"] == 0.25
    assert row["completion_rate"] == 1.0
    assert row["is_complete"] is True
    # terminal after 10, 30, 60, 120 minutes
    assert row["p50_minutes_to_terminal"] == pytest.approx(45)
    assert row["p90_minutes_to_terminal"] == pytest.approx(60 + 0.7 * 60)
    assert row["top_failure_reasons"] == [
        {"reason": "(no reason given)", "devices": 1},
        {"reason": "Device busy", "devices": 1},
    ]


def test_command_without_terminal_status(commands):
    row = commands["req-open"]
    assert row["target_devices"] == 2  # d1 twice (requeued) counts once, by its latest status
    assert (row["queued_devices"], row["in_progress_devices"]) == (1, 1)
    assert row["terminal_devices"] == 0
    assert row["pending_devices"] == 2
    assert row["success_rate"] == 0.0
    assert row["completion_rate"] == 0.0
    assert row["is_complete"] is False
    assert row["p50_minutes_to_terminal"] is None
    assert row["p90_minutes_to_terminal"] is None
    assert row["top_failure_reasons"] == []


def test_command_with_zero_targets(commands):
    row = commands["req-none"]
    assert row["requested_device_count"] == 0
    assert row["requested_group_count"] == 1
    assert row["target_devices"] == 0
    assert row["success_rate"] is None
    assert row["failure_rate"] is None
    assert row["completion_rate"] is None
    assert row["is_complete"] is False


def test_operation_rollout(operations):
    row = operations["op-1"]
    assert row["state"] == "success"
    assert row["is_terminal"] is True
    assert row["target_devices"] == 4
    assert (row["success_devices"], row["failure_devices"], row["queued_devices"]) == (2, 1, 1)
    assert row["success_rate"] == 0.5
    assert row["completion_rate"] == 0.75
    assert row["is_complete"] is False
    # terminal after 5, 15, 25 minutes
    assert row["p50_minutes_to_terminal"] == pytest.approx(15)
    assert row["p90_minutes_to_terminal"] == pytest.approx(15 + 0.8 * 10)
    assert row["top_failure_reasons"] == [{"reason": "Install failed", "devices": 1}]
    assert (row["api_success_device_count"], row["api_failed_device_count"]) == (2, 1)


def test_operation_without_devices(operations):
    row = operations["op-2"]
    assert (row["state"], row["state_raw"], row["is_terminal"]) == ("initiated", "RESOLVING", False)
    assert row["target_devices"] == 0
    assert row["success_rate"] is None
