"""A full scan's walk in parts limited by time (`sources/esper/scan/walk.py`), without requests."""

from __future__ import annotations

from typing import Any

import pytest
from esper_warehouse.sources.esper.scan import walk as walk_module
from esper_warehouse.sources.esper.scan.walk import TIME_STEP_DEVICES, DeviceWalk

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


def test_a_part_past_its_time_ends_without_waiting_for_its_fan_outs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first step of TIME_STEP_DEVICES, alone while the fan-outs' pace is unknown; then None
    (wait). Once the part's time is over it ends, read or not: what it handed out is read before
    it is committed, so waiting for more would only push its commit later."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(350, part_seconds=60.0)
    part: Any = walk.take(lambda item: True)
    assert len(next(part)) == TIME_STEP_DEVICES
    assert next(part) is None  # pace unknown: one step unread at a time
    walk.read_by("device_apps")
    assert next(part) is None  # every fan-out must have read it
    now[0] = 61.0  # the part's time is over, its step still unread
    assert list(part) == [], "the part waited for its fan-outs past its time"
    assert walk.has_more()
    walk.read_by("device_events")
    now[0] = 200.0
    nxt: Any = walk.take(lambda item: True)  # the next part: its own time, one step at least
    assert len(next(nxt)) >= TIME_STEP_DEVICES
    now[0] = 261.0
    assert list(nxt) == [], "a step was handed out past the part's time"


def test_a_part_ends_when_its_unread_steps_would_take_it_past_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 12 requests a second the fan-outs read ~6 devices a second: a part due in 60 s stops
    handing out steps once the ones unread would keep them busy until then (before: it handed
    out two more steps of at least 100 devices after its time, ~35 s more at that pace)."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(3000, part_seconds=60.0)
    part: Any = walk.take(lambda item: True)
    handed = [len(next(part))]
    now[0] = 3.0
    _read(walk)  # 20 devices in 3 s: ~6.7 a second
    handed += [len(next(part)), len(next(part))]
    assert handed == [TIME_STEP_DEVICES, 100, 100]  # a quarter of the part at that pace
    assert next(part) is None  # two steps unread
    now[0] = 33.0
    _read(walk)  # 120 devices in 33 s: ~3.6 a second; 100 unread take ~27 s more
    assert list(part) == [], "its unread devices reach its end: the part ends"
    assert sum(handed) == 220


def test_a_part_within_its_time_or_not_limited_by_time_takes_every_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    within = _walk(250, part_seconds=3600.0)
    handed = []
    for step in within.take(lambda item: True):
        if step is None:
            now[0] += 1.0
            _read(within)
        else:
            handed.append(len(step))
    assert handed == [TIME_STEP_DEVICES, 250 - TIME_STEP_DEVICES] and not within.has_more()

    by_devices = _walk(250, part_seconds=None)
    assert [len(s) for s in by_devices.take(lambda item: True)] == [250]


def test_a_step_is_what_the_fan_outs_read_in_a_quarter_of_the_parts_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """20 devices read in 1 s of a 60 s part: the next step is 20/s * 15 s = 300 devices
    (a fast API gets big steps, each a page per table to dlt); near the part's end, no more than
    the fan-outs read until then; never fewer than TIME_STEP_DEVICES."""
    now = [0.0]
    monkeypatch.setattr(walk_module.time, "monotonic", lambda: now[0])
    walk = _walk(9000, part_seconds=60.0)
    part: Any = walk.take(lambda item: True)
    assert len(next(part)) == TIME_STEP_DEVICES
    now[0] = 1.0
    _read(walk)
    assert len(next(part)) == 300
    now[0] = 50.0  # 320 handed out, 20 read in 50 s: 0.4/s, the unread take the rest
    assert list(part) == []
    now[0] = 0.0
    late = _walk(900, part_seconds=60.0)
    part = late.take(lambda item: True)
    next(part)
    now[0] = 1.0
    _read(late)
    assert [len(next(part)), len(next(part))] == [300, 300]
    now[0] = 50.0
    _read(late)
    _read(late)  # 620 devices in 50 s: 12.4/s, for the 10 s left: 124, below a quarter's 186
    assert len(next(part)) == 124


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
