"""A device removed between full scans: the nightly reads the device list incrementally (updated
since the last run), so only the next full scan names the removal (`is_removed`). Until then every
number over the devices says how many removed devices it still counts, from the API's device count
each run reads as it opens (docs/decisions.md, "Removals between full scans")."""

from __future__ import annotations

from pathlib import Path

import duckdb
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.views.status import status

from .helpers import load
from .test_freshness import headlines


def _current_ids(wh: Path) -> set[str]:
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(
            "select device_id from intermediate.int_devices_current where not is_removed"
        ).fetchall()
    return {row[0] for row in rows}


def test_devices_removed_since_the_full_scan_are_said_until_it_names_them(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    first = modelled_first_load(wh)
    assert not any(row[6] for row in headlines(wh, "devices")), "a first load counts them all"
    world = sim.world
    gone = sorted(_current_ids(wh))[:2]
    with world.lock:  # two devices leave the fleet (as an admin's removal would)
        for device in gone:
            world.fleet.removed[world.fleet.ids.index(device)] = True
        world.fleet.version += 1
    sim.advance(24)
    nightly = load(sim, wh, build_models=True)
    assert nightly.exit_code == Exit.OK, nightly.error

    served = {device["id"] for device in sim.truth("devices")}
    counted = _current_ids(wh)
    assert set(gone) <= counted - served  # the nightly did not see them go
    note = (
        f"Devices: {len(counted - served)} removed since the full scan of {first.as_of:%Y-%m-%d} "
        f"still counted (the API counted {len(served)} at {nightly.as_of:%Y-%m-%d %H:%M} UTC; "
        "the next full scan names them)"
    )
    for like in ("devices", "compliance_rate", "not_seen_devices"):
        rows = headlines(wh, like)
        assert rows and all(row[6] == note for row in rows), (like, rows)
    assert not any(row[6] for row in headlines(wh, "worst_command_rollouts"))  # not a device count
    capsys.readouterr()
    status(wh)
    shown = capsys.readouterr().out
    assert "compliant devices (marts.headlines): " in shown and note in shown

    weekly = load(sim, wh, build_models=True, full=True)
    assert weekly.exit_code == Exit.OK, weekly.error
    assert _current_ids(wh) == {device["id"] for device in sim.truth("devices")}
    assert not any(row[6] for row in headlines(wh, "devices"))
