"""Esper's own drift verdict on a device (`drift_state`, `drift_severity`; live routes 12 and 15).

Esper publishes no meaning for the codes. The simulator reads them as the project's vocabulary
does (sql/vocabulary/drift_states.csv): 0 in sync, 1 drifted; the severity is 0 when in sync.
Esper judges the device's settings against its blueprint, which the warehouse cannot see, so the
two verdicts can differ either way:
- by default Esper reports drift when the assigned and current blueprints differ, and, on about
  one Android device in 40, a settings drift that the blueprint ids do not show (severity 2);
- the warehouse's check also fails a device whose blueprint version is behind or whose upgrade
  failed, which Esper's code need not count.
`set_drift` overrides one device's verdict (tests), and bumps its `updated_at` so the next
incremental run reads it.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from esper_warehouse.simulator.fleet import Fleet

if TYPE_CHECKING:
    from esper_warehouse.simulator.state import World

IN_SYNC, DRIFTED = 0, 1
SETTINGS_DRIFT_ONE_IN = 40


def esper_drift(f: Fleet, i: int) -> tuple[int, int]:
    """(drift_state, drift_severity) Esper reports for device `i`."""
    overrides: dict[int, tuple[int, int]] = getattr(f, "drift_overrides", {})
    if i in overrides:
        return overrides[i]
    if f.bp_assigned[i] != f.bp_current[i]:
        return DRIFTED, 1
    if zlib.crc32(f"{f.seed}:{f.serial[i]}:drift".encode()) % SETTINGS_DRIFT_ONE_IN == 0:
        return DRIFTED, 2
    return IN_SYNC, 0


def set_drift(w: World, device_id: str, state: int, severity: int) -> None:
    """Esper reports `state` and `severity` for `device_id` from now on."""
    with w.lock:
        f = w.fleet
        i = f.ids.index(device_id)
        if not hasattr(f, "drift_overrides"):
            f.drift_overrides = {}  # type: ignore[attr-defined]
        f.drift_overrides[i] = (state, severity)  # type: ignore[attr-defined]
        f.touch(i, w.now)
