"""`esper-warehouse doctor` against the simulator: clean, drifted, throttled, refused.

The probe is bounded (the simulator's own request count), names the route and field of a drift,
and its output (stdout, stderr, JSON) holds no value the API served, nor the key.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from esper_warehouse.pipelines.cli import main as cli_main
from esper_warehouse.pipelines.commands import doctor as doctor_command
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.shapes.reference import BASES, reference
from esper_warehouse.pipelines.tools import table_docs
from esper_warehouse.pipelines.views import doctor
from esper_warehouse.pipelines.views.doctor import probes
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.catalogues import GROUPS
from esper_warehouse.sources.esper.tables.data_tap_jobs import DATA_TAP_PATH
from esper_warehouse.sources.esper.tables.devices import V2_DEVICE_APPS_PATH

from tests import live_shapes
from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import with_body
from tests.routes import glob

ROOT = Path(__file__).resolve().parents[2]

# raw table -> fields whose values identify a record or a person (none may reach the report)
IDENTIFYING = {
    "devices": ("id", "name", "serial", "alias", "udid", "global_device_id", "tenant_id"),
    "groups": ("id", "name", "path"),
    "blueprints": ("id", "name", "version_id"),
    "tenant_apps": ("id", "package_name"),
    "applications": ("id", "application_name", "package_name"),
    "command_requests": ("id",),
    "operations": ("id",),
    "users": ("user_id", "name", "email"),
    "user_profiles": ("token", "username", "last_login"),
    "roles": ("id",),
}


def _run(sim: Any, **kwargs: Any) -> tuple[int, str, str, dict]:
    out, err = io.StringIO(), io.StringIO()
    json_path = kwargs.pop("json_path", None)
    code = doctor_command.run(
        sim.base_url,
        kwargs.pop("api_key", API_KEY),
        kwargs.pop("enterprise_id", ENTERPRISE_ID),
        out=out,
        err=err,
        json_path=json_path,
        **kwargs,
    )
    report = json.loads(json_path.read_text()) if json_path and json_path.exists() else {}
    return code, out.getvalue(), err.getvalue(), report


def _identifying_values(sim: Any) -> set[str]:
    values: set[str] = {API_KEY, ENTERPRISE_ID, sim.base_url}
    for table, names in IDENTIFYING.items():
        for record in sim.truth(table):
            for name in names:
                value = record.get(name)
                if isinstance(value, str | int) and len(str(value)) >= 6:
                    values.add(str(value))
    return values


def test_doctor_is_clean_bounded_and_leaks_no_value(
    sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Through the command line, Data Tap included: exit 0, every route the source reads is
    probed, within `MAX_REQUESTS` and as many as docs/guide/real-tenant.md says (`table_docs.doctor_requests`),
    and no id, name, serial, URL or key is printed."""
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    # The simulator's query moves on per status read, not per second: no real waits between reads.
    monkeypatch.setattr(probes, "DATA_TAP_POLL_S", 0.0)
    json_path = tmp_path / "doctor.json"

    code = cli_main(["doctor", "--json", str(json_path), "--data-tap"])

    captured = capsys.readouterr()
    report = json.loads(json_path.read_text())
    breaks = [f for r in report["routes"] for f in r["findings"] if f["severity"] == "break"]
    assert (code, report["verdict"], breaks) == (0, "ok", [])
    assert "nothing found that would break a run (exit 0)" in captured.out
    stats = sim.stats()
    assert stats["total"] <= doctor.MAX_REQUESTS
    assert report["requests"] == stats["total"]
    probed = {(r["method"], r["route"]) for r in report["routes"] if r["status"] == 200}
    read_by_source = {e.path for e in TABLES.values()} | {V2_DEVICE_APPS_PATH}
    assert {("GET", p) for p in read_by_source} <= probed
    assert ("POST", DATA_TAP_PATH) in {(r["method"], r["route"]) for r in report["routes"]}
    readme = table_docs.section((ROOT / table_docs.TENANT_PAGE).read_text(), "doctor-requests")
    counted = table_docs.doctor_requests(stats["routes"])
    assert readme == counted, f"the guide says {readme!r}: run `{table_docs.COMMAND}`"

    text = captured.out + captured.err + json_path.read_text()
    leaked = sorted(v for v in _identifying_values(sim) if v in text)
    assert leaked == []


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            {"variant": "null_list", "route": "/v2/devices/"},
            "GET /v2/devices/ envelope: results is null on a list that has items",
        ),
        (
            {"variant": "envelope", "route": "/v2/tenant-apps"},
            "GET /v2/tenant-apps envelope: is legacy-list, expected content-list",
        ),
    ],
    ids=["null_list", "envelope"],
)
def test_a_drift_names_route_and_field_and_exits_3(
    sim: Any, tmp_path: Path, fault: dict, expected: str
) -> None:
    sim.set_faults([{"kind": "drift", **fault}])
    json_path = tmp_path / "doctor.json"

    code, out, _, report = _run(sim, json_path=json_path)

    assert code == Exit.DRIFT == 3
    assert "Would break a run:" in out and f"\n  {expected}\n" in out
    assert report["verdict"] == "drift"
    texts = {
        doctor.Finding(**f).text()
        for r in report["routes"]
        for f in r["findings"]
        if f["severity"] == "break"
    }
    assert expected in texts


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            {"route": "/v2/devices/", "field": "updated_at", "to": "updatedAt"},
            "GET /v2/devices/ items: missing key updated_at",
        ),
        (
            {"route": "/enterprise/*/device/", "field": "id", "to": "deviceId"},
            "GET /enterprise/{eid}/device/ items: missing key id",
        ),
        (  # optional in the spec's reference, the table's key all the same (issue 42)
            {"route": glob(GROUPS), "field": "id", "to": "uid"},
            "GET /enterprise/{eid}/devicegroup/ items: missing key id",
        ),
        (
            {"route": "/v2/tenant-apps", "field": "id", "to": "uid"},
            "GET /v2/tenant-apps items: missing key id",
        ),
    ],
    ids=["rename", "rename-key", "rename-group-id", "rename-tenant-app-id"],
)
def test_a_missing_key_is_set_aside_as_a_run_would_and_exits_6(
    sim: Any, tmp_path: Path, fault: dict, expected: str
) -> None:
    """A key or cursor the run needs, missing: a run sets the records aside and is partial
    (issue 51), and doctor says so, not "would break a run"."""
    sim.set_faults([{"kind": "drift", "variant": "rename", **fault}])
    code, out, _, report = _run(sim, json_path=tmp_path / "doctor.json")

    assert code == Exit.PARTIAL == 6, out
    assert "A run would set these records aside" in out and f"\n  {expected}\n" in out
    assert "Would break a run:" not in out
    texts = {
        doctor.Finding(**f).text()
        for r in report["routes"]
        for f in r["findings"]
        if f["severity"] == doctor.SET_ASIDE
    }
    assert expected in texts


def test_429_is_honoured(sim: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Two 429s with Retry-After: 1 s; the probe waits them out and still finishes clean."""
    sim.set_faults([{"kind": "rate_limit", "rps": 1, "burst": 1, "times": 2}])
    caplog.set_level(logging.WARNING)

    code, out, err, _ = _run(sim)

    stats = sim.stats()
    assert code == 0
    assert stats["statuses"].get("429") == 2
    assert "2 throttled (429)" in out
    seconds = float(out.split(" s\n", 1)[0].rsplit(", ", 1)[1])
    assert seconds >= 1.9  # two Retry-After: 1 waits
    assert stats["total"] <= doctor.MAX_REQUESTS
    assert API_KEY not in out + err + caplog.text


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"api_key": "wrong-key-0123456789"}, "the API key was refused (HTTP 401)"),
        (
            {"enterprise_id": "00000000-0000-4000-8000-000000000000"},
            "answered 404: the enterprise id or the base URL is probably wrong",
        ),
    ],
    ids=["key", "enterprise"],
)
def test_a_refused_key_or_wrong_tenant_stops_with_exit_2(
    sim: Any, options: dict, says: str
) -> None:
    code, out, err, _ = _run(sim, **options)

    assert code == Exit.CONFIG == 2
    assert says in out
    assert sim.stats()["total"] <= 2
    for value in (*options.values(), API_KEY):
        assert value not in out + err


def test_the_live_answers_themselves_are_clean_and_a_type_change_breaks() -> None:
    """The recorded live shapes of the routes the source reads pass; a cursor of another type
    breaks a run; an object turned list on the path of a field the source flattens is a note (a
    run reads that field as NULL and counts it, as it reads any value it cannot read)."""
    for template, table in (
        ("/v2/devices/", "devices"),
        ("/enterprise/{enterprise_id}/device/", "devices"),
        ("/commands/v0/commands/", "command_requests"),
        ("/commands/v0/status/", "command_statuses"),
        ("/v2/devices/{deviceId}/device-apps/", "device_apps"),
    ):
        recorded = live_shapes.route("GET", template)
        answer = live_shapes.synthesize(recorded["observed"])
        envelope = answer.get("content", answer)
        envelope["count"] = recorded["count"]  # the recorded count (0 where results is null)
        report = doctor.check(answer, template, table)
        assert [f.text() for f in report.findings if f.severity == doctor.BREAK] == []

    answer = live_shapes.synthesize(live_shapes.route("GET", "/v2/devices/")["observed"])
    answer["content"]["results"][0]["software_info"] = []
    answer["content"]["results"][0]["updated_at"] = {"at": 1}
    report = doctor.check(answer, "/v2/devices/", "devices")
    assert [f.text() for f in report.findings if f.severity == doctor.BREAK] == [
        "GET /v2/devices/ items: updated_at is object, expected string"
    ]
    notes = [f.text() for f in report.findings if f.severity == doctor.NOTE]
    assert "GET /v2/devices/ items: software_info is list, expected object" in notes


def test_a_drift_fault_without_a_known_variant_is_refused(sim: Any) -> None:
    with pytest.raises(ValueError, match="drift needs a variant"):
        sim.set_faults([{"kind": "drift", "variant": "shuffle"}])
    with pytest.raises(ValueError, match="needs 'field'"):
        sim.set_faults([{"kind": "drift", "variant": "rename", "field": "id"}])


# --------------------------------------------------------------- issue 22: findings 6 and 7


KEYED_VALUES = ("Lobby-Kiosk-07", "R58M12ABCD", "Jane_Doe")


def test_values_used_as_keys_and_the_key_itself_are_never_printed(
    sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object keyed by names, serials, ids or the API key (the server echoing it) on every
    device answer: neither the text report nor the JSON names them; they are "unknown key"s."""
    original = probes._StatusRecorder.handle_request

    def keyed(self: Any, request: Any) -> Any:
        response = original(self, request)
        if "/device" not in request.url.path or response.status_code != 200:
            return response
        body = json.loads(response.read())
        envelope = body.get("content", body)
        extra = {name: {"seen": 1} for name in (*KEYED_VALUES, API_KEY)}
        for item in envelope.get("results") or []:
            item["by_name"] = extra
            item.update({API_KEY: 1, "Lobby-Kiosk-07": API_KEY})
        return with_body(response, body)

    monkeypatch.setattr(probes._StatusRecorder, "handle_request", keyed)
    json_path = tmp_path / "doctor.json"

    code, out, err, report = _run(sim, json_path=json_path)

    text = out + err + json_path.read_text()
    assert code == 0, out
    assert [v for v in (*KEYED_VALUES, API_KEY) if v in text] == []
    assert doctor.UNKNOWN_KEY in out and doctor.UNKNOWN_KEY in json_path.read_text()
    assert report["verdict"] == "ok"


def test_readme_names_every_basis_of_a_reference() -> None:
    """The guide's `doctor` paragraph (docs/guide/real-tenant.md) names each basis a probe's line may show (`BASES`), among
    them `none`, the basis of the routes with no shape on record."""
    readme = (ROOT / "docs" / "guide" / "real-tenant.md").read_text()
    paragraph = readme[readme.index("`doctor` prints one line per probe") :].split("\n\n")[0]
    paragraph = " ".join(paragraph.split("```")[0].split())
    assert [b for b in BASES if f"`{b}` (" not in paragraph] == []
    assert reference("GET", TABLES["pipeline_runs"].path).basis == "none"  # nothing recorded


def test_the_report_names_only_known_fields() -> None:
    """An allowlist, not a blocklist: any key outside the references is hidden, whatever it
    looks like."""
    assert doctor.safe_key("battery_stats") == "battery_stats"
    assert doctor.safe_key("softwareInfo") == "softwareInfo"
    for value in (*KEYED_VALUES, "kiosk", "front_desk"):
        assert doctor.safe_key(value) == doctor.UNKNOWN_KEY


def _probe(sim: Any, **options: Any) -> doctor.Result:
    return doctor.probe(sim.base_url, API_KEY, ENTERPRISE_ID, **options)


def test_429_without_retry_after_is_bounded(sim: Any) -> None:
    """Every request throttled, no Retry-After: the API sees at most MAX_REQUESTS (50) requests,
    and the waits (recorded, not slept) stay within the time budget."""
    waits: list[float] = []
    sim.set_faults([{"kind": "rate_limit", "rps": 0.001, "burst": 1, "retry_after": False}])

    result = _probe(sim, sleep=waits.append)

    stats = sim.stats()
    assert doctor.MAX_REQUESTS == 50  # docs/guide/real-tenant.md: "at most **50 requests**"
    assert stats["total"] <= doctor.MAX_REQUESTS
    assert result.requests <= doctor.MAX_REQUESTS
    assert stats["statuses"].get("429", 0) >= 10
    assert sum(waits) <= doctor.TIME_BUDGET_S + doctor.MAX_RETRY_WAIT_S


def test_a_503_storm_is_bounded_in_requests_and_time(
    sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every answer 503 (real waits): requests within the budget, and no probe starts after the
    time budget, so the whole probe ends within the budget plus one probe's retries."""
    monkeypatch.setattr(probes, "TIME_BUDGET_S", 1.0)
    sim.set_faults([{"kind": "status", "status": 503}])

    result = _probe(sim)

    assert sim.stats()["total"] <= doctor.MAX_REQUESTS
    one_probe = doctor.MAX_RETRIES * doctor.BACKOFF_MAX_S + 3  # backoffs + 3 quick answers
    assert result.seconds < probes.TIME_BUDGET_S + one_probe
    assert any("time budget" in s for s in result.skipped)
    assert "failed (HTTP 503) after retries" in doctor.render(result)


def _distinct_keys_body(n: int) -> dict:
    items = [{f"k{i}": i, "x": {"y": i}} for i in range(n)]
    return {"count": n, "next": None, "results": items}


def test_shape_comparison_is_linear_in_the_body() -> None:
    """20,000 objects with distinct keys are compared in seconds (the old deduplication compared
    every shape with every other: 100x the time for 10x the body, minutes for large bodies)."""
    import time

    def seconds(n: int) -> float:
        body = _distinct_keys_body(n)
        started = time.process_time()  # CPU time: the other helpers' load does not count
        doctor.check(body, "/v2/devices/", "devices")
        return time.process_time() - started

    small, large = seconds(2_000), seconds(20_000)
    assert large < 10.0
    assert large < 30 * max(small, 0.02)


def test_every_route_is_probed_after_a_403_and_the_refused_are_listed(
    sim: Any, tmp_path: Path
) -> None:
    """403 on the groups' children and 404 on operations: every other route is still probed;
    the report says which routes the key cannot read, as a partial run, not as a break."""
    sim.set_faults(
        [
            {"kind": "status", "status": 403, "route": "/v2/blueprints*"},
            {"kind": "status", "status": 404, "route": "/v0/operations*"},
        ]
    )
    json_path = tmp_path / "doctor.json"

    code, out, _, report = _run(sim, json_path=json_path)

    probed = {(r["method"], r["route"]) for r in report["routes"]}
    assert ("GET", TABLES["status_metrics"].path) in probed
    assert ("GET", TABLES["heartbeats"].path) in probed
    refused = {r["route"]: r["status"] for r in report["refused"]}
    assert refused == {
        f"GET {TABLES['blueprints'].path}": 403,
        f"GET {TABLES['operations'].path}": 404,
    }
    assert "The key cannot read (a run would skip these tables: a partial run):" in out
    assert "Would break a run" not in out
    # what a run would do, in words and in its exit code; a refused list is never "empty"
    assert code == Exit.PARTIAL
    assert report["verdict"] == "partial"
    assert report["would_skip"] == [
        "blueprint_versions", "blueprints", "operation_devices", "operations",
    ]  # fmt: skip
    assert "a run would be partial (exit 6), skipping blueprint_versions, blueprints" in out
    assert "its list (operations) was refused" in out and "its list was empty" not in out
    assert report["stopped"] is None


def test_the_plain_simulator_has_nothing_that_would_break(sim: Any) -> None:
    """A nullable field missing from some records (battery_stats on devices that never
    reported one) is a note; only a key or a cursor the run needs would break it."""
    code, out, _, _ = _run(sim)

    assert code == 0
    assert "would break a run:" not in out.lower()
    answer = {"count": 1, "next": None, "previous": None, "results": [{"id": "a1b2"}]}
    report = doctor.check(answer, "/enterprise/{eid}/device/", "devices")
    breaks = [f.text() for f in report.findings if f.severity == doctor.BREAK]
    assert breaks == []
    del answer["results"][0]["id"]
    report = doctor.check(answer, "/enterprise/{eid}/device/", "devices")
    assert [f.text() for f in report.findings if f.severity == doctor.SET_ASIDE] == [
        "GET /enterprise/{eid}/device/ items: missing key id"
    ]


# --------------------------------------------------------------- issue 33: doctor on its own simulator


def _notes(report: dict) -> list[str]:
    return [
        doctor.Finding(**f).text()
        for r in report["routes"]
        for f in r["findings"]
        if f["severity"] == doctor.NOTE and not f["problem"].startswith(doctor.REFUSED)
    ]


@pytest.mark.parametrize(("seed", "devices"), [(7, 200), (11, 120)])
def test_the_projects_own_simulator_causes_no_note(
    seed: int, devices: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulator answers as the live recordings (or, where there are none, the spec) say: a
    device of any platform, a command's own arguments, a root group, a spec-only route. So doctor
    run on it prints no note, whichever devices come first on its pages (two seeds)."""
    from esper_warehouse.simulator import Simulator

    monkeypatch.setattr(probes, "DATA_TAP_POLL_S", 0.0)
    with Simulator(devices=devices, seed=seed, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        code, out, _, report = _run(
            sim, json_path=tmp_path / "doctor.json", data_tap_sql="select 1 as one"
        )

    assert (code, _notes(report)) == (0, [])
    assert "Notes (" not in out


def test_an_item_is_compared_with_the_reference_of_its_platform() -> None:
    """The live /v2/devices/ sample is an Android device: an Apple item is compared with the
    spec's AppleDeviceV2 (no Android-only key is missing from it), while an Android item that
    lacks what the live sample carries, or holds a key no reference knows, is still a note."""
    answer = live_shapes.synthesize(live_shapes.route("GET", "/v2/devices/")["observed"])
    android = answer["content"]["results"][0]
    android["platform"] = "ANDROID"
    apple = {
        **{k: android[k] for k in ("id", "name", "serial", "state", "os_version", "updated_at")},
        "platform": "APPLE",
        "os": "iOS",
        "udid": "00008030-001A",
    }
    answer["content"]["results"] = [apple]
    texts = [f.text() for f in doctor.check(answer, "/v2/devices/", "devices").findings]
    assert not [t for t in texts if any(k in t for k in ("drift_state", "is_gms", "udid"))]

    answer["content"]["results"] = [android]
    assert [f.text() for f in doctor.check(answer, "/v2/devices/", "devices").findings] == []
    del android["drift_state"]
    android["shoe_size"] = 42
    texts = [f.text() for f in doctor.check(answer, "/v2/devices/", "devices").findings]
    assert texts == [
        "GET /v2/devices/ items: missing key drift_state",
        f"GET /v2/devices/ items: extra key {doctor.UNKNOWN_KEY}",
    ]


def test_a_refused_key_is_said_on_its_row(sim: Any) -> None:
    """The row of the request that answered 401 says the key was refused, never `ok`."""
    code, out, _, report = _run(sim, api_key="wrong-key-0123456789")

    assert code == Exit.CONFIG
    row = next(line for line in out.splitlines() if line.startswith("GET /v2/devices/"))
    assert " 401 " in row and "key refused (HTTP 401)" in row
    assert report == {} and "ok" not in row.split()


def test_every_row_says_what_its_probe_checks(sim: Any) -> None:
    """Routes probed more than once (/v2/devices/ by offset and by cursor, the v1 application
    list read for two tables) are told apart by what each probe asks, and no request is sent
    twice to check the same thing."""
    code, out, _, _ = _run(sim)
    assert code == Exit.OK

    table = out.split("\n\n")[1].splitlines()
    header, rows = table[0], table[1:]
    assert "probe" in header
    probe = header.index("probe")
    told_apart = {(r[: header.index(" status")].strip(), r[probe:].strip()) for r in rows}
    assert len(told_apart) == len(rows)
    devices = [r for r in rows if r.startswith("GET /v2/devices/ ")]
    assert len(devices) == 2
    assert any("offset" in r for r in devices) and any("cursor" in r for r in devices)
    assert sim.stats()["total"] == len(rows)


def _configured(sim: Any, monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
    """The tenant and `settings` in the environment, as an admin sets them for a run."""
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    for name, value in settings.items():
        monkeypatch.setenv(f"SOURCES__ESPER__{name.upper()}", value)


def test_a_setting_a_run_would_refuse_stops_doctor_with_exit_2_before_any_request(
    sim: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _configured(sim, monkeypatch, lag_hours="-48")

    code = cli_main(["doctor"])

    err = capsys.readouterr().err
    assert code == Exit.CONFIG
    assert "SOURCES__ESPER__LAG_HOURS (sources.esper.lag_hours) = -48" in err, err
    assert "a number from 0 to 720" in err
    assert sim.stats()["total"] == 0


def test_a_missing_setting_is_named_by_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for name in ("BASE_URL", "API_KEY", "ENTERPRISE_ID"):
        monkeypatch.delenv(f"SOURCES__ESPER__{name}", raising=False)
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", "https://tenant-api.esper.cloud/api")

    assert cli_main(["doctor"]) == Exit.CONFIG

    err = capsys.readouterr().err
    assert "missing configuration: SOURCES__ESPER__API_KEY, SOURCES__ESPER__ENTERPRISE_ID" in err


def test_the_report_shows_the_settings_a_run_would_use_not_at_their_default(
    sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """What a run would change from the declared defaults, in the report and its JSON; the key,
    the base URL and the enterprise id never."""
    _configured(sim, monkeypatch, lag_hours="4", data_tap_queries='{"battery": "select 1"}')
    json_path = tmp_path / "doctor.json"

    code = cli_main(["doctor", "--json", str(json_path)])

    out = capsys.readouterr().out
    assert code == Exit.OK, out[-2000:]
    line = next(x for x in out.splitlines() if x.startswith("Settings not at their default"))
    assert "lag_hours = 4.0" in line and "data_tap_queries = ['battery']" in line, line
    assert json.loads(json_path.read_text())["settings"] == {
        "lag_hours": 4.0,
        "data_tap_queries": ["battery"],
    }
    for value in (API_KEY, ENTERPRISE_ID, sim.base_url):
        assert value not in out
