"""Every refused answer is counted, never silent; a refused part is asked again until it answers.

A 400/403/404 on a per-device or per-id route skips that part, counts it and makes the run
partial (exit 6, named in `unavailable`); only a 404 whose record has vanished from its list is
not a refusal. A 403/404 on any tenant-level list after devices and groups skips that table and
the tables read from it, as `doctor` says a run would (docs/decisions.md, "Refused answers").
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.commands import doctor as doctor_command
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.record import REASON_WIDTH
from esper_warehouse.pipelines.run.runner import RunResult, summary
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.sources.esper.common import apps_route
from esper_warehouse.sources.esper.http import EsperClient, EsperNotFoundError
from esper_warehouse.sources.esper.run.ledger import RunLedger
from esper_warehouse.sources.esper.tables import TABLES

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import compare, load, reading, rows

FEED = "/enterprise/*/device/*/download/eventfeed/*"
# The runs of a test of the device tables read those and what a nightly reads their devices
# from: the devices that changed, and those with activity in the command statuses and the
# operations' devices (`tables/events.py`); the catalogues, credentials, access and pipelines
# play no part in which devices are skipped or asked again.
FEEDS = ["devices", "device_events", "command_statuses", "operation_devices"]
DEVICE_TABLES = [*FEEDS, "device_apps"]
V2_APPS = "/v2/devices/*/device-apps/*"


def _recorded_unavailable(wh: Path) -> dict[str, str]:
    with duckdb.connect(str(wh), read_only=True) as con:
        (text,) = con.execute(
            "select unavailable from esper._esper_runs order by started_at desc limit 1"
        ).fetchone()
    return json.loads(text)


def test_a_404_on_every_event_feed_is_counted_and_the_next_run_asks_again(
    sim, wh: Path, capsys
) -> None:
    """A first load whose every feed answers 404 (the devices still listed): exit 6, each
    device counted, never "complete"; the next (incremental) run, with no device changed,
    asks those feeds again and loads every event."""
    devices = ["devices", "device_events"]
    sim.set_faults([{"kind": "status", "status": 404, "route": FEED}])
    first = load(sim, wh, resources=devices)

    assert first.exit_code == Exit.PARTIAL, first.error
    why = first.unavailable["device_events"]
    assert why.startswith(f"{len(sim.truth('devices'))} device(s) skipped: ")
    assert "/download/eventfeed/ answered 404" in why
    assert set(_recorded_unavailable(wh)) == {"device_events"}
    assert "1 skipped in whole or in part" in summary(first)  # never just "all complete"
    if _has(wh, "device_events"):
        assert rows(wh, "device_events", ("count(*)",)) == [(0,)]
    capsys.readouterr()
    status(wh)
    shown = capsys.readouterr().out
    assert "unavailable in the last run" in shown and "device_events" in shown

    sim.clear_faults()
    again = load(sim, wh, resources=devices)  # incremental: no device changed meanwhile
    assert again.mode == "incremental"
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "device_events")


@pytest.mark.parametrize("then", ["nightly", "weekly_scan"])
def test_a_404_on_apple_and_windows_app_lists_is_counted_and_asked_again(
    sim, wh: Path, then: str
) -> None:
    """`/v2/devices/{id}/device-apps/` answering 404: those devices are skipped and counted (their
    apps neither loaded nor retired), and the next run, a nightly or the scheduled full scan
    (which re-reads only changed devices), reads them again without any change."""
    apps = ["devices", "device_apps"]
    v2 = [d for d in sim.truth("devices") if apps_route(d) == "v2"]
    sim.set_faults([{"kind": "status", "status": 404, "route": V2_APPS}])
    first = load(sim, wh, resources=apps)

    assert first.exit_code == Exit.PARTIAL, first.error
    why = first.unavailable["device_apps"]
    assert why.startswith(f"{len(v2)} device(s) skipped: GET /v2/devices/{{id}}/device-apps/")
    assert v2, "the fleet has Apple or Windows devices"

    sim.clear_faults()
    weekly = {"source_options": {"full_scan_interval_days": 0}} if then == "weekly_scan" else {}
    again = load(sim, wh, resources=apps, **weekly)
    assert again.mode == ("full" if weekly else "incremental")
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "device_apps")


def _has(wh: Path, table: str) -> bool:
    with duckdb.connect(str(wh), read_only=True) as con:
        return bool(
            con.execute(
                "select count(*) from information_schema.tables where table_schema = 'esper' "
                "and table_name = ?",
                [table],
            ).fetchone()[0]
        )


# per-id route (glob) -> the table read from it
PER_ID = {
    "blueprint_versions": "/v2/blueprints/*/versions/*",
    "tenant_app_versions": "/v2/tenant-apps/*/versions*",
    "application_versions": "/v1/enterprise/*/application/*/version/*",
    "operation_devices": "/v0/operations/*/devices/*",
    "provisioning_profile_versions": "/v2/provisioning-profiles/*/versions*",
    "role_scopes": "/authz2/v1/roles/*/scopes*",
    "user_groups": "/authz2/v1/users/*/groups*",
    "user_profiles": "/user/*",
}


def _keys(wh: Path, table: str) -> set[tuple]:
    key = ", ".join(TABLES[table].key)
    with duckdb.connect(str(wh), read_only=True) as con:
        return set(con.execute(f"select {key} from esper.{table}").fetchall())


@pytest.mark.parametrize("table", PER_ID)
def test_a_404_on_a_per_id_route_is_counted_keeps_the_rows_and_is_asked_again(
    sim, wh: Path, first_load, table: str
) -> None:
    """A full run whose per-id route answers 404 for records still listed: exit 6, the table
    named with its refused records counted; nothing it held is lost (a replaced table is kept
    whole); the next run reads those records again and the table is complete."""
    assert first_load(wh).exit_code == 0
    before = _keys(wh, table)
    sim.set_faults([{"kind": "status", "status": 404, "route": PER_ID[table]}])
    refused = load(sim, wh, full=True, resources=[table])

    assert refused.exit_code == Exit.PARTIAL, refused.error
    assert (
        f"answered 404 (not served for this {_noun(table)}, which this run lists"
        in (refused.unavailable[table])
    )
    assert set(refused.unavailable) == {table}
    assert _keys(wh, table) >= before  # nothing lost
    if TABLES[table].disposition == "replace":
        assert _keys(wh, table) == before  # kept whole, not emptied nor cut

    sim.clear_faults()
    sim.reset_stats()
    again = load(sim, wh, resources=[table])  # a nightly: the refused records are read again
    assert again.exit_code == Exit.OK, again.error
    assert sim.stats()["routes"].get(f"GET {TABLES[table].path}", 0) > 0  # asked again
    assert _keys(wh, table) >= before


def _noun(table: str) -> str:
    parent = TABLES[table].parent or TABLES[table].loaded_with or TABLES[table].needs[0]
    return parent.removesuffix("s").replace("_", " ")


def test_a_404_for_a_record_gone_from_its_list_is_not_a_refusal(sim) -> None:
    """The one 404 that is not a refusal: the record vanished from its list (read again after
    the 404). A record still listed is a refused part, counted."""
    from esper_warehouse.sources.esper.common import refused_part

    ledger = RunLedger()
    error = EsperNotFoundError("gone?", route="GET /v2/blueprints/{id}/versions/")
    listed = sim.truth("blueprints")[0]["id"]
    with EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID) as client:
        client.settings_proven = True
        parent = TABLES["blueprints"]
        assert not refused_part(ledger, client, "blueprint_versions", parent, "removed-id", error)
        assert ledger.refusals.skipped() == {}
        assert refused_part(ledger, client, "blueprint_versions", parent, listed, error)
    assert ledger.refusals.skipped()["blueprint_versions"].startswith("1 blueprint(s) skipped: ")


# Core lists, each refused with a 403 once devices and groups have answered.
CORE_LISTS = [
    "/v2/blueprints*",
    "/v2/tenant-apps*",
    "/v1/enterprise/*/application/*",
    "/commands/v0/commands/*",
    "/v0/operations/*",
    "/v2/heartbeat/*",
    "/enterprise/*/device/",  # the legacy device list (Android patch levels)
]


@pytest.mark.parametrize("refusal", [403, 404])
def test_a_refused_core_list_is_a_partial_run_as_doctor_says(
    sim, wh: Path, first_load, refusal: int
) -> None:
    """A nightly whose core lists answer 403 (or 404), and its feeds 400: exit 6 (not 3), those
    tables and the tables read from them skipped and kept, the feeds counted, the rest loaded;
    `doctor` facing the same answers names exactly the tables the run skipped and ends with the
    run's exit code. The night after, everything loads again."""
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    faults = [{"kind": "status", "status": refusal, "route": r} for r in CORE_LISTS]
    sim.set_faults([*faults, {"kind": "status", "status": 400, "route": FEED}])
    out = io.StringIO()
    json_path = wh.parent / "doctor.json"
    verdict = doctor_command.run(
        sim.base_url, API_KEY, ENTERPRISE_ID, out=out, err=io.StringIO(), json_path=json_path
    )
    report = json.loads(json_path.read_text())
    sim.reset_stats()
    nightly = load(sim, wh)

    assert nightly.exit_code == Exit.PARTIAL, nightly.error
    assert verdict == nightly.exit_code
    assert set(nightly.unavailable) == set(report["would_skip"])
    assert set(nightly.unavailable) == {
        "blueprints", "blueprint_versions", "tenant_apps", "tenant_app_versions", "applications",
        "application_versions", "command_requests", "command_statuses", "operations",
        "operation_devices", "heartbeats", "devices", "device_events",
    }  # fmt: skip
    assert f"answered {refusal}" in nightly.unavailable["blueprint_versions"]
    # the summary a person reads: "partial:", then one line a skipped table, never one long line
    shown = summary(nightly).splitlines()
    assert not [line for line in shown if line.startswith("error:")]
    head = shown.index(f"partial: {len(nightly.unavailable)} table(s) skipped in whole or in part:")
    tables = [line.split(":")[0].strip() for line in shown[head + 1 :] if line[2] != " "]
    assert tables == sorted(nightly.unavailable)
    assert max(map(len, shown)) < 300
    assert nightly.unavailable["devices"].startswith("loaded without Android security patch")
    text = out.getvalue()
    assert "a run would be partial (exit 6)" in text
    assert "its list was empty" not in text  # refused, never "empty"
    assert "its list (blueprints) was refused" in text
    with reading(wh):
        compare(sim, wh, "devices", exact=False)
        compare(sim, wh, "groups")
    assert _keys(wh, "blueprints") and _keys(wh, "operations")  # kept from the first load

    sim.clear_faults()
    sim.advance(hours=24)
    after = load(sim, wh)
    assert after.exit_code == Exit.OK, after.error
    with reading(wh):
        for table in ("blueprints", "blueprint_versions", "command_requests", "operations"):
            compare(sim, wh, table, exact=False)


def test_a_partial_runs_summary_cuts_a_long_reason_saying_how_much() -> None:
    """A skipped table's reason of 2,000 characters and four clauses: the summary shows three
    clauses on lines of their own, the long one cut, each cut saying "N of M"."""
    why = "; ".join(["x" * 2_000, "second", "third", "fourth"])
    result = RunResult(
        run_id="r", exit_code=Exit.PARTIAL, status="partial", unavailable={"t": why}, error=why
    )
    shown = summary(result).splitlines()
    assert shown[-6:] == [
        "partial: 1 table(s) skipped in whole or in part:",
        f"  t: {'x' * REASON_WIDTH}… ({REASON_WIDTH} of 2,000 characters)",
        "    second",
        "    third",
        "    (3 of 4 reasons)",
        "  (`esper-warehouse status` shows every reason whole)",
    ]


def test_a_device_refused_once_gets_its_events_the_next_night_without_changing(
    sim, wh: Path, first_load
) -> None:
    """A nightly whose feeds answer 403 for the devices it reads: exit 6, counted. The next
    nightly, with no device changed since, asks those feeds again and every event is loaded
    (before: exit 0, "complete", their events missing until each device changed again).

    The nightlies read the device tables alone (`FEEDS`)."""
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    sim.set_faults([{"kind": "status", "status": 403, "route": FEED}])
    refused = load(sim, wh, resources=FEEDS)
    assert refused.exit_code == Exit.PARTIAL, refused.error
    assert (
        "device(s) skipped: GET /enterprise/{id}/device/{id}/download/eventfeed/ answered 403"
        in (refused.unavailable["device_events"])
    )
    with reading(wh), pytest.raises(AssertionError, match=r"device_events: .* missing"):
        compare(sim, wh, "device_events")  # the night's events are not there yet

    sim.clear_faults()
    again = load(sim, wh, resources=FEEDS)  # the API's clock has not moved: no device changed
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "device_events")


class Flicker:
    """One device that leaves the device lists for the rest of a run once its apps or feed are
    asked for: those routes answer 404 for it, and from the first such request on, the lists
    (v2, legacy, their counts) leave it out, as a tenant may while it re-enrolls a device.
    `back()` ends it: the device is listed again, unchanged, and its routes answer."""

    def __init__(self, sim, monkeypatch: pytest.MonkeyPatch, device_id: str) -> None:
        index = sim.world.fleet.ids.index(device_id)
        order, decide = sim.world.device_order, sim.faults.decide
        self.sim, self.on, self.hidden = sim, True, False

        def deciding(path: str, offset_paging: bool):
            if self.on and f"/device/{device_id}/" in path:
                self.hidden = True
            return decide(path, offset_paging)

        def ordered(ordering: str) -> list[int]:
            listed = order(ordering)
            return [i for i in listed if i != index] if self.on and self.hidden else listed

        monkeypatch.setattr(sim.faults, "decide", deciding)
        monkeypatch.setattr(sim.world, "device_order", ordered)
        sim.set_faults(
            [{"kind": "status", "status": 404, "route": f"/enterprise/*/device/{device_id}/*"}]
        )

    def back(self) -> None:
        self.on = False
        self.sim.clear_faults()


def _android_with_apps_and_events(sim, among: set[str] | None = None) -> str:
    apps = {a["device_id"] for a in sim.truth("device_apps")}
    events = {e["device_id"] for e in sim.truth("device_events")}
    return next(
        d["id"]
        for d in sim.truth("devices")
        if apps_route(d) == "legacy"
        and d["id"] in apps & events
        and (among is None or d["id"] in among)
    )


def _current_apps(wh: Path, device_id: str) -> set[tuple]:
    return set(
        rows(
            wh, "device_apps", ("id",), f"where _dlt_valid_to is null and device_id = '{device_id}'"
        )
    )


def _flicker_is_refused_and_kept(run, wh: Path, device_id: str, apps_before: set[tuple]) -> None:
    """The run that met the flicker: partial, both parts counted, nothing of the device retired."""
    assert run.exit_code == Exit.PARTIAL, (run.exit_code, run.error)
    for table in ("device_apps", "device_events"):
        assert run.unavailable[table].startswith("1 device(s) skipped: "), run.unavailable
        assert "answered 404" in run.unavailable[table]
    with reading(wh):
        assert _current_apps(wh, device_id) == apps_before, "its apps were retired"


@pytest.mark.parametrize("then", ["back", "gone"])
def test_a_device_gone_from_its_list_for_one_night_keeps_its_apps_and_is_asked_again(
    sim, wh: Path, first_load, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """Gone means gone twice. A nightly reads a changed Android device; its app list and feed
    answer 404 and the device lists leave it out from then on, although this run listed it: the
    device is a refused part (exit 6, counted, its current apps kept). The next nightly, with
    the device back and unchanged, reads its apps and its events; with the device still gone
    (its record answers 404 too, no list names it), its apps are retired and it is not asked
    again. The nightlies read the device tables alone (`DEVICE_TABLES`)."""
    assert first_load(wh).exit_code == 0
    before = {d["id"]: d["updated_at"] for d in sim.truth("devices")}
    sim.advance(hours=24)
    changed = {d["id"] for d in sim.truth("devices") if before.get(d["id"]) != d["updated_at"]}
    device_id = _android_with_apps_and_events(sim, changed)
    with reading(wh):
        apps_before = _current_apps(wh, device_id)
    assert apps_before, "the first load holds its apps"

    flicker = Flicker(sim, monkeypatch, device_id)
    refused = load(sim, wh, resources=DEVICE_TABLES)
    assert flicker.hidden, "the device left the lists during the nightly"
    _flicker_is_refused_and_kept(refused, wh, device_id, apps_before)

    if then == "gone":
        sim.set_faults([
            {"kind": "status", "status": 404, "route": f"/enterprise/*/device/{device_id}/*"},
            {"kind": "status", "status": 404, "route": f"/v2/devices/{device_id}*"},
        ])  # fmt: skip
        sim.reset_stats()
        gone = load(sim, wh, resources=DEVICE_TABLES)
        assert gone.exit_code == Exit.OK, gone.error
        assert sim.stats()["routes"]["GET /v2/devices/{id}"] == 1, "its record asked again"
        with reading(wh):
            assert _current_apps(wh, device_id) == set(), "gone twice: its apps are retired"
        sim.reset_stats()
        assert load(sim, wh, resources=DEVICE_TABLES).exit_code == Exit.OK
        assert sim.stats()["routes"].get("GET /v2/devices/{id}", 0) == 0, "not asked again"
        return
    flicker.back()
    again = load(sim, wh, resources=DEVICE_TABLES)  # the API's clock has not moved
    assert again.mode == "incremental"
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "device_apps")
        compare(sim, wh, "device_events")


def test_a_device_gone_from_its_list_during_a_first_load_gets_its_apps_the_next_night(
    sim, wh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same flicker during a first load: its walk holds the device, so it is a refused part,
    not a removed device; the next nightly reads its apps and events (before: never loaded).
    Both runs read the device tables alone (`DEVICE_TABLES`)."""
    device_id = _android_with_apps_and_events(sim)
    flicker = Flicker(sim, monkeypatch, device_id)
    first = load(sim, wh, resources=DEVICE_TABLES)
    assert flicker.hidden
    _flicker_is_refused_and_kept(first, wh, device_id, set())

    flicker.back()
    again = load(sim, wh, resources=DEVICE_TABLES)
    assert again.mode == "incremental"
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "device_apps")
        compare(sim, wh, "device_events")


# With the devices: whether a run is full or incremental follows the device scan.
BLUEPRINTS = ["devices", "blueprints", "blueprint_versions"]
OPERATIONS = ["devices", "operations", "operation_devices"]


@pytest.mark.parametrize("when", ["first load", "nightly"])
def test_a_blueprint_gone_from_its_list_for_a_moment_gets_its_versions_the_next_night(
    sim, wh: Path, monkeypatch: pytest.MonkeyPatch, first_load, when: str
) -> None:
    """Gone means gone twice for every parent, not only devices: a blueprint this run listed,
    whose versions answer 404 and which its list read again leaves out, is a refused part (the
    run loads the blueprint as current), so the next night reads its versions. Taken as gone, its
    head was recorded and an incremental night never asked for its versions again. The runs after
    the first load read the blueprints and their versions (and the devices) alone."""
    from esper_warehouse.simulator.routes import blueprints as routes

    bid = sim.truth("blueprints")[0]["id"]
    if when == "nightly":
        first_load(wh)
        sim.advance(hours=1)
        with sim.world.lock:  # an admin publishes a new version: the nightly reads its list
            sim.world.fleet.add_blueprint_version(0, sim.world.now, random.Random(1))
    hidden = {"on": False}
    decide, listed = sim.faults.decide, routes.content_list

    def deciding(path: str, offset_paging: bool):
        if f"/v2/blueprints/{bid}/versions" in path:
            hidden["on"] = True
        return decide(path, offset_paging)

    def content_list(req, records, shape, *args):
        shown = [r for r in records if not (hidden["on"] and r.get("id") == bid)]
        return listed(req, shown, shape, *args)

    monkeypatch.setattr(sim.faults, "decide", deciding)
    monkeypatch.setattr(routes, "content_list", content_list)
    sim.set_faults([{"kind": "status", "status": 404, "route": f"/v2/blueprints/{bid}/versions/*"}])
    flickered = load(sim, wh, resources=BLUEPRINTS)
    assert hidden["on"], "its versions were asked for"
    assert flickered.exit_code == Exit.PARTIAL, (flickered.exit_code, flickered.error)
    assert flickered.unavailable["blueprint_versions"].startswith("1 blueprint(s) skipped: ")

    hidden["on"] = False
    sim.clear_faults()
    monkeypatch.setattr(sim.faults, "decide", decide)
    again = load(sim, wh, resources=BLUEPRINTS)
    assert again.mode == "incremental"
    assert again.exit_code == Exit.OK, again.error
    with reading(wh):
        compare(sim, wh, "blueprint_versions")


def test_an_operation_gone_from_its_list_for_a_moment_gets_its_devices_the_next_run(
    sim, wh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gone means gone twice for an operation too: one this run read from its list (a first
    load reads them all), whose devices answer 404 and which its list read again leaves out, is
    a refused part kept open (the run loads the operation as current), so the next run reads its
    devices. Taken as gone, it was closed and its devices never read. Both runs read the
    operations and their devices (and the device list) alone."""
    from esper_warehouse.simulator.routes import operations as routes

    operation = sim.truth("operations")[0]["id"]
    hidden = {"on": False}
    decide, listed = sim.faults.decide, routes.content_list

    def deciding(path: str, offset_paging: bool):
        if f"/v0/operations/{operation}/devices" in path:
            hidden["on"] = True
        return decide(path, offset_paging)

    def content_list(req, items, build, *args, **kwargs):
        if hidden["on"] and req.path.endswith("/v0/operations/"):
            items = [o for o in items if build(o)["id"] != operation]
        return listed(req, items, build, *args, **kwargs)

    monkeypatch.setattr(sim.faults, "decide", deciding)
    monkeypatch.setattr(routes, "content_list", content_list)
    sim.set_faults(
        [{"kind": "status", "status": 404, "route": f"/v0/operations/{operation}/devices/*"}]
    )
    flickered = load(sim, wh, resources=OPERATIONS)
    assert hidden["on"], "its devices were asked for"
    assert flickered.exit_code == Exit.PARTIAL, (flickered.exit_code, flickered.error)
    assert flickered.unavailable["operation_devices"].startswith("1 operation(s) skipped: ")

    hidden["on"] = False
    sim.clear_faults()
    monkeypatch.setattr(sim.faults, "decide", decide)
    sim.reset_stats()
    again = load(sim, wh, resources=OPERATIONS)
    assert again.mode == "incremental"
    assert again.exit_code == Exit.OK, again.error
    assert sim.stats()["routes"].get("GET /v0/operations/{id}/devices/", 0) > 0  # asked again
    with reading(wh):
        compare(sim, wh, "operation_devices")
