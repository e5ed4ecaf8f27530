"""Late data: a nightly load keeps every row the API holds, whatever its timestamps say.

Three simulator faults (simulator/faults.py) put time against the loader: `late_events` (devices
upload events stamped days ago), `clock_skew` (the `Date` header hours ahead of or behind the
data) and `out_of_order` (the pages of an event feed out of order across their boundaries).
Under each, a full load, a simulated day and a nightly load hold exactly what the API holds.
"""

from __future__ import annotations

from datetime import timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
from esper_warehouse.sources.esper.times import parse_time

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import compare, load, reading, rows

EVENTS = "/enterprise/*/device/*/download/eventfeed/*"
SKEW = 9  # hours: more than the 2-hour lag a clock-based cursor would have to absorb
CHECKED = ("devices", "device_events", "heartbeats", "command_statuses", "operation_devices")
# What the runs load: the checked tables (each brings the list it reads ids from, `Table.needs`),
# not the whole tenant (docs/decisions.md, "Scenario tests load the tables they check").
LOADED = CHECKED

FAULTS = {
    "late_events": [{"kind": "late_events", "share": 0.1, "events": 3, "days": 4}],
    "clock_ahead": [{"kind": "clock_skew", "hours": SKEW}],
    "clock_behind": [{"kind": "clock_skew", "hours": -SKEW}],
    "out_of_order": [{"kind": "out_of_order", "route": EVENTS}],
    "late_out_of_order": [
        {"kind": "late_events", "share": 0.1, "events": 3, "days": 4},
        {"kind": "out_of_order", "route": EVENTS},
    ],
}


def feed(sim, device_id: str, offset: int, limit: int) -> httpx.Response:
    path = f"/enterprise/{ENTERPRISE_ID}/device/{device_id}/download/eventfeed/"
    return httpx.get(
        sim.base_url + path,
        params={"limit": limit, "offset": offset},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )


# `late_out_of_order` combines `late_events` and `out_of_order`, so those two alone run in the slow
# tier (`make bench`; docs/decisions.md, "The slow tier").
SLOW_FAULTS = ("late_events", "out_of_order")


@pytest.mark.parametrize(
    "fault",
    [pytest.param(f, marks=pytest.mark.slow) if f in SLOW_FAULTS else f for f in FAULTS],
)
def test_full_then_nightly_lose_nothing_under_time_faults(
    sim, wh: Path, first_load, fault: str
) -> None:
    sim.set_faults(FAULTS[fault])
    # Small pages make every feed span several pages, so page edges matter.
    options: dict = {"resources": LOADED}
    if "out_of_order" in fault:
        options["source_options"] = {"page_size": 5}
    # `late_events` acts on `advance` only, so its first load is the shared one.
    first = first_load(wh) if fault == "late_events" else load(sim, wh, **options)
    assert first.exit_code == 0, first.error
    loaded = {r[0] for r in rows(wh, "device_events", ("id",))}
    data_now = sim.now

    sim.advance(hours=24)
    nightly = load(sim, wh, **options)
    assert nightly.exit_code == 0, nightly.error
    assert nightly.mode == "incremental"
    with reading(wh):
        for table in CHECKED:
            # Rows of devices removed meanwhile stay in the warehouse (the API no longer lists them).
            compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))

    # The fault did bite: rows a clock-based cursor would have skipped exist and were loaded.
    new = [e for e in sim.truth("device_events") if e["id"] not in loaded]
    if fault.startswith("late"):
        late = [e for e in new if parse_time(e["created_on"]) < data_now]
        assert len(late) >= 5, "late_events added no event stamped before the first load"
    elif fault == "clock_ahead":
        assert nightly.as_of == sim.now + timedelta(hours=SKEW)
        skipped = [e for e in new if parse_time(e["created_on"]) < first.as_of - timedelta(hours=2)]
        assert skipped, "no event fell between the data's time and the skewed Date - lag"
    elif fault == "clock_behind":
        assert nightly.as_of == sim.now - timedelta(hours=SKEW)
        ahead = [h for h in sim.truth("heartbeats") if parse_time(h["timestamp"]) > nightly.as_of]
        assert ahead, "no device was seen after the API's Date"
    else:
        assert any(len(rows(wh, "device_events", ("id",), f"where device_id = '{d}'")) > 10
                   for d in {e["device_id"] for e in new})  # fmt: skip


def test_time_faults_change_what_the_api_serves(sim) -> None:
    """The faults themselves: a skewed Date, late events with old stamps, swapped page edges."""
    sim.set_faults([{"kind": "clock_skew", "hours": -3}])
    answer = feed(sim, sim.truth("devices")[0]["id"], 0, 5)
    assert parsedate_to_datetime(answer.headers["date"]) == sim.now - timedelta(hours=3)

    before = {e["id"] for e in sim.truth("device_events")}
    newest = max(before)
    sim.set_faults([{"kind": "late_events", "share": 0.05, "events": 2, "days": 3}])
    start = sim.now
    sim.advance(hours=1)
    late = [e for e in sim.truth("device_events") if e["id"] not in before]
    stamped_before = [e for e in late if parse_time(e["created_on"]) < start]
    assert len(stamped_before) >= 8  # ~5 % of the ~100 reachable devices, 2 events each
    assert all(e["id"] > newest for e in stamped_before)  # new ids, as the server stores them
    devices = {d["id"]: d for d in sim.truth("devices")}
    assert all(parse_time(devices[e["device_id"]]["updated_at"]) == sim.now for e in late)

    sim.set_faults([{"kind": "out_of_order", "route": EVENTS}])
    device = max(devices, key=lambda d: len([e for e in late if e["device_id"] == d]))
    total = feed(sim, device, 0, 3).json()["count"]
    pages = [feed(sim, device, offset, 3).json()["results"] for offset in range(0, total, 3)]
    stamps = [parse_time(e["created_on"]) for e in pages[0] + pages[1]]
    assert stamps[3] > stamps[2]  # the newest-first order breaks at the page edge
    sim.clear_faults()
    whole = feed(sim, device, 0, 250).json()["results"]
    # every event once over all the pages, whatever their order
    assert sorted(e["id"] for page in pages for e in page) == sorted(e["id"] for e in whole)


APPS = ("/app/", "/device-apps/")  # the per-device app routes (Android legacy, Apple/Windows v2)


def app_requests(stats: dict) -> int:
    """Requests to the per-device app routes in a simulator's `stats()`."""
    return sum(n for route, n in stats["routes"].items() if route.endswith(APPS))


def test_the_scheduled_full_scan_rereads_changed_devices_only_and_loses_nothing(
    sim, wh: Path, first_load, shared_first_load
) -> None:
    # The scheduled full scan (not `run --full`, which re-reads everything), due after 1.5 days.
    options = {"full_scan_interval_days": 1.5}
    selected = [*LOADED, "device_apps"]  # the compared tables (the census comes with devices)
    # A first load is a full scan whatever the interval: the shared one.
    first = first_load(wh)
    assert first.exit_code == 0, first.error
    first_apps = app_requests(shared_first_load.stats)
    sim.advance(hours=24)
    assert load(sim, wh, source_options=options, resources=selected).mode == "incremental"
    sim.set_faults(FAULTS["late_events"])  # late uploads move updated_at: the scan sees them
    sim.advance(hours=24)
    sim.reset_stats()
    weekly = load(sim, wh, source_options=options, resources=selected)
    assert weekly.exit_code == 0, weekly.error
    assert weekly.mode == "full"
    with reading(wh):
        for table in (*CHECKED, "device_apps", "device_census"):
            if table == "device_census":  # the complete scan's census is every device listed now
                assert {r[0] for r in rows(wh, table, ("id",))} == {
                    d["id"] for d in sim.truth("devices")
                }
                continue
            compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))
    # Apps re-read: the devices whose updated_at moved (~10 % here, late uploads included) and a
    # 1/20 slice, not the whole fleet (feeds: those and the devices with command activity).
    assert app_requests(sim.stats()) <= 0.25 * first_apps, (app_requests(sim.stats()), first_apps)
