"""A full scan's walk in parts limited by time (`sources/esper/run/walk.py`), without requests."""

from __future__ import annotations

from typing import Any

import pytest
from esper_warehouse.sources.esper.run import walk as walk_module
from esper_warehouse.sources.esper.run.walk import STEPS_IN_FLIGHT, TIME_STEP_DEVICES, DeviceWalk

FAN_OUTS = ("device_apps", "device_events")


def _walk(devices: int, part_seconds: float | None) -> DeviceWalk:
    """A walk of one listed page of `devices` devices (its pages given, not read)."""
    walk = DeviceWalk(client=None, path="/v2/devices/", limit=1000, part_devices=1000,  # type: ignore[arg-type]
                      part_seconds=part_seconds, readers=FAN_OUTS)  # fmt: skip
    walk._pages = iter([[{"id": str(i)} for i in range(devices)]])
    return walk


def _read(walk: DeviceWalk) -> None:
    for reader in FAN_OUTS:
        walk.read_by(reader)


def test_a_part_past_its_time_ends_once_its_fan_outs_caught_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steps of TIME_STEP_DEVICES, at most STEPS_IN_FLIGHT unread; then None (wait); once the
    fan-outs read a step the clock is read: past the time, the part ends; the next goes on."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(350, part_seconds=60.0)
    part: Any = walk.take(lambda item: True)
    steps = [next(part) for _ in range(STEPS_IN_FLIGHT)]
    assert [len(s) for s in steps] == [TIME_STEP_DEVICES] * STEPS_IN_FLIGHT
    assert next(part) is None  # the fan-outs have read no step: no more is handed out
    walk.read_by("device_apps")
    assert next(part) is None  # every fan-out must have read it
    now[0] = 61.0  # the part's time is over
    walk.read_by("device_events")
    assert list(part) == []  # caught up, and past its time: the part ends
    assert walk.has_more()
    now[0] = 200.0
    nxt: Any = walk.take(lambda item: True)  # the next part: its own time, one step at least
    assert len(next(nxt)) == TIME_STEP_DEVICES
    now[0] = 261.0
    assert list(nxt) == [], "a step was handed out past the part's time"
    assert len(walk._held) == 350 - 3 * TIME_STEP_DEVICES


def test_a_part_within_its_time_or_not_limited_by_time_takes_every_device() -> None:
    within = _walk(250, part_seconds=3600.0)
    handed = []
    for step in within.take(lambda item: True):
        if step is None:
            _read(within)
        else:
            handed.append(len(step))
    assert handed == [100, 100, 50] and not within.has_more()

    by_devices = _walk(250, part_seconds=None)
    assert [len(s) for s in by_devices.take(lambda item: True)] == [250]


def test_a_step_is_what_the_fan_outs_read_in_a_quarter_of_the_parts_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 devices read in 10 s of a 60 s part: the next step is 20/s * 15 s = 300 devices (a
    fast API gets big steps, each a page per table to dlt); never fewer than TIME_STEP_DEVICES."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(900, part_seconds=60.0)
    part: Any = walk.take(lambda item: True)
    assert [len(next(part)) for _ in range(2)] == [TIME_STEP_DEVICES] * 2
    now[0] = 10.0
    _read(walk)
    _read(walk)
    assert len(next(part)) == 300
    now[0] = 50.0  # still 200 devices read, in 50 s: 4/s * 15 s = 60, fewer than the least step
    assert len(next(part)) == TIME_STEP_DEVICES


def test_the_next_part_starts_at_the_pace_of_the_one_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A part begins with a small step only when nothing is known of the fan-outs' pace: the
    parts after the first start with a step sized by the pace they read at (no wait per part)."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(3000, part_seconds=40.0)
    first: Any = walk.take(lambda item: True)
    assert len(next(first)) == TIME_STEP_DEVICES
    now[0] = 1.0
    _read(walk)  # 100 devices read in 1 s: 100/s, so 1,000 in a quarter of 40 s
    for step in first:
        if step is None:
            _read(walk)
    nxt: Any = walk.take(lambda item: True)
    assert len(next(nxt)) > TIME_STEP_DEVICES, "the second part's first step is sized by the pace"
