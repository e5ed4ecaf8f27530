"""Unit tests of the source's pure parts: page -> Arrow, early stop, Data Tap typing and polling."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from esper_warehouse.sources.esper.arrow import to_arrow
from esper_warehouse.sources.esper.http.pages import Page
from esper_warehouse.sources.esper.run.state import EarlyStop
from esper_warehouse.sources.esper.scan.devices import software_by_id, software_of, with_software
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.data_tap_jobs import (
    DataTapError,
    result_to_arrow,
    run_query,
    table_name,
)

from tests.live_shapes import document, route, synthesize


def test_device_page_has_declared_types_flattened_fields_and_extras() -> None:
    records = [
        {
            "id": "a",
            "state": 1,
            "tags": ["x", "y"],
            "updated_at": "2026-10-01T00:00:00Z",
            "hardware_info": {"brand": "Acme", "model": "M1"},
            "battery_stats": {"battery_level": 55},
            "software_info": {"esper_agent_info": {"version_name": "7.1"}},
            "brand_new_field": 3,
        },
        {"id": "b", "updated_at": "2026-10-01T02:00:00.5+02:00", "battery_stats": {}},
    ]
    table = to_arrow(records, TABLES["devices"])
    assert table.schema.field("updated_at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("state").type == pa.int64()
    assert table.column("tags").to_pylist() == ['["x","y"]', None]
    assert table.column("hardware_info__brand").to_pylist() == ["Acme", None]
    assert table.column("battery_stats__battery_level").to_pylist() == [55, None]
    assert table.column("software_info__esper_agent_info__version_name").to_pylist()[0] == "7.1"
    assert table.column("brand_new_field").to_pylist() == [3, None]
    assert table.column("updated_at").to_pylist()[1] == datetime(2026, 10, 1, 0, 0, 0, 500000, UTC)
    # A page without a declared field still has the column, with the declared type.
    assert table.schema.field("last_seen").type == pa.timestamp("us", tz="UTC")


def test_row_hash_follows_content() -> None:
    apps = TABLES["device_apps"]  # keyed (device_id, id): both are given
    a = to_arrow([{"device_id": "d", "id": "1", "version_code": "1"}], apps, row_hash=True)
    b = to_arrow([{"version_code": "1", "id": "1", "device_id": "d"}], apps, row_hash=True)
    c = to_arrow([{"device_id": "d", "id": "1", "version_code": "2"}], apps, row_hash=True)
    assert a.column("_row_hash") == b.column("_row_hash")
    assert a.column("_row_hash") != c.column("_row_hash")


def _page(*stamps: str) -> Page:
    return Page([{"created_at": s} for s in stamps], None, None, None, True)


def test_early_stop_only_while_order_is_descending() -> None:
    stop = datetime(2026, 10, 5, tzinfo=UTC)
    ordered = EarlyStop("created_at", stop)
    pages = [_page("2026-10-09T00:00:00Z", "2026-10-07T00:00:00Z"), _page("2026-10-04T00:00:00Z")]
    pages.append(_page("2026-10-01T00:00:00Z"))
    read = list(ordered.pages(pages))
    assert len(read) == 2 and ordered.stopped  # the third page is never requested

    shuffled = EarlyStop("created_at", stop)
    pages = [_page("2026-10-07T00:00:00Z", "2026-10-09T00:00:00Z"), _page("2026-10-04T00:00:00Z")]
    pages.append(_page("2026-10-08T00:00:00Z"))
    read = list(shuffled.pages(pages))
    assert len(read) == 3 and not shuffled.stopped and not shuffled.ordered
    assert [len(fresh) for _, fresh in read] == [2, 0, 1]


def test_data_tap_result_is_typed_from_its_schema() -> None:
    job = {  # the documented status answer: the result nested under `result` (live §15)
        "status": "SUCCEEDED",
        "error_message": None,
        "result": {
            "schema": {
                "column_count": 4,
                "columns": [
                    {"name": "n", "position": 1, "type_name": "INT"},
                    {"name": "device_id", "position": 0, "type_name": "STRING"},
                    {"name": "at", "position": 2, "type_name": "TIMESTAMP"},
                    {"name": "ok", "position": 3, "type_name": "BOOLEAN"},
                ],
            },
            "data_array": [
                ["d1", "3", "2026-10-01T00:00:00Z", "true"],
                ["d2", None, None, "false"],
            ],
            "truncated": False,
        },
    }
    table = result_to_arrow("q", job)
    assert table.column_names == ["device_id", "n", "at", "ok"]
    assert table.schema.field("n").type == pa.int64()
    assert str(table.schema.field("at").type).startswith("timestamp")
    assert table.column("ok").to_pylist() == [True, False]
    with pytest.raises(DataTapError):
        table_name("Bad Name")


class _FakeTap:
    """Answers a scripted sequence of job states (no HTTP: the polling logic alone)."""

    def __init__(self, states: list[str]) -> None:
        self.states = states
        self.posts = 0

    def post(self, path: str, json: dict, retry: bool = True) -> dict:
        self.posts += 1
        return {"content": {"id": f"job{self.posts}", "status": "PENDING"}}

    def redact(self, text: str) -> str:
        return text

    def get(self, path: str, params: dict | None = None, retry: bool = True) -> dict:
        state = self.states.pop(0) if self.states else "RUNNING"
        result = {"schema": {"columns": []}, "data_array": [], "truncated": state == "TRUNC"}
        return {
            "content": {
                "status": "SUCCEEDED" if state == "TRUNC" else state,
                "error_message": "boom" if state == "FAILED" else None,
                "result": result if state in ("SUCCEEDED", "TRUNC") else None,
            }
        }


def test_data_tap_polling_never_resubmits_a_stuck_job_and_fails_clearly() -> None:
    clock = iter(range(0, 10_000, 10))
    tap = _FakeTap([])
    with pytest.raises(DataTapError, match=r"still (PENDING|RUNNING) after 100 s"):
        run_query(tap, "q", "select 1", deadline_s=100, stuck_s=30, row_limit=10,  # type: ignore[arg-type]
                  sleep=lambda s: None, clock=lambda: next(clock))  # fmt: skip
    assert tap.posts == 1  # a stuck job is waited for, never submitted again (quota, section 18)
    failed = _FakeTap(["RUNNING", "FAILED"])
    with pytest.raises(DataTapError, match="FAILED: boom"):
        run_query(failed, "q", "select 1", deadline_s=100, stuck_s=30, row_limit=10,  # type: ignore[arg-type]
                  sleep=lambda s: None)  # fmt: skip
    truncated = _FakeTap(["RUNNING", "TRUNC"])
    with pytest.raises(DataTapError, match="returned a truncated result"):
        run_query(truncated, "q", "select 1", deadline_s=100, stuck_s=30, row_limit=10,  # type: ignore[arg-type]
                  sleep=lambda s: None)  # fmt: skip


# ------------------------------------------------------------- live shapes -> rows -> Arrow
# Items synthesized from the live evidence (docs/spec/live-shapes.json), not from the simulator:
# each resource's row conversion must accept what the real API served, nulls included.

_WHEN = "2026-10-01T08:00:00Z"


def _live_items(method: str, path: str) -> list[dict]:
    body = synthesize(route(method, path)["observed"])
    page = body.get("content", body)
    return page["results"] or []


def _timed(items: list[dict], table: str) -> list[dict]:
    """The synthesized strings of declared timestamp fields made real times (the live sample
    string is a placeholder, not a time)."""
    stamps = {c.name for c in TABLES[table].columns if c.type == "timestamp"}
    return [
        {k: (_WHEN if k in stamps and v is not None else v) for k, v in i.items()} for i in items
    ]


def test_live_device_list_items_get_patch_level_and_build_from_the_legacy_list() -> None:
    items = _timed(_live_items("GET", "/v2/devices/"), "devices")
    assert "security_patch_level" not in items[0]["software_info"]  # live route 15
    legacy = _live_items("GET", "/enterprise/{enterprise_id}/device/")
    legacy[0]["id"] = items[0]["id"]
    legacy[0]["softwareInfo"]["securityPatchLevel"] = "2026-09-05"
    legacy[0]["softwareInfo"]["androidBuildNumber"] = "UP1A.231005.007"
    software = software_by_id(map(software_of, legacy))
    for item in items:
        with_software(item, software)
    table = to_arrow(items, TABLES["devices"])
    row = table.slice(0, 1).to_pylist()[0]
    assert row["software_info__security_patch_level"] == "2026-09-05"
    assert row["software_info__os_build_number"] == "UP1A.231005.007"
    assert row["group_id"] is None  # live: null on Android v2 devices
    assert row["last_seen"] == datetime(2026, 10, 1, 8, tzinfo=UTC)
    assert table.schema.field("state").type == pa.int64()
    assert table.schema.field("foundation_info").type == pa.string()  # null on v2, JSON if not


def test_live_command_list_items_with_null_lists_convert() -> None:
    items = _timed(_live_items("GET", "/commands/v0/commands/"), "command_requests")
    table = to_arrow(items, TABLES["command_requests"])
    assert table.num_rows == 2
    for name in ("groups", "schedule_args", "reason", "alias"):
        assert table.column(name).null_count == 2, name
    assert table.schema.field("groups").type == pa.string()  # JSON text, typed although null
    statuses = _timed(_live_items("GET", "/commands/v0/status/"), "command_statuses")
    assert to_arrow(statuses, TABLES["command_statuses"]).column("reason").null_count == 1


def test_live_v1_applications_and_version_lists_convert() -> None:
    apps = to_arrow(_live_items("GET", "/v1/enterprise/{enterprise_id}/application/"),
                    TABLES["applications"])  # fmt: skip
    row = apps.to_pylist()[0]
    assert row["latest_version__id"] == "live-sample"  # the head application_versions compares
    assert row["latest_version__version_code"] == "live-sample"
    assert row["updated_on"] is None and row["is_active"] is None  # v1 items have neither
    path = "/v1/enterprise/{enterprise_id}/application/{application_id}/version/"
    versions = to_arrow(_timed(_live_items("GET", path), "application_versions"),
                        TABLES["application_versions"])  # fmt: skip
    assert versions.schema.field("installed_count").type == pa.int64()
    assert versions.schema.field("release_date").type == pa.timestamp("us", tz="UTC")
    assert versions.column("release_name").null_count == 1


def test_live_device_apps_android_and_apple_convert() -> None:
    android = _timed(
        _live_items("GET", "/enterprise/{enterprise_id}/device/{device_id}/app/"), "device_apps"
    )
    assert _live_items("GET", "/v2/devices/{deviceId}/device-apps/") == []  # results: null
    practice = document()["client_practice"]
    fields = practice["fields_read"]["apple_app"]
    vpp = {name: "live-sample" for name in fields}
    vpp.update(bundle_id="com.microsoft.Outlook", apple_app_version="4.2405.0",
               app_type=practice["fields_read"]["apple_app_types"][0], device_families=None,
               id="da-1", device_id="dev-i", app_id=None, app_version_id=None)  # fmt: skip
    rows = [{**i, "device_id": "dev-a", "route": "legacy"} for i in android]
    rows.append({**vpp, "route": "v2"})
    table = to_arrow(rows, TABLES["device_apps"], row_hash=True)
    apple = table.to_pylist()[-1]
    assert (apple["bundle_id"], apple["apple_app_version"], apple["app_type"]) == (
        "com.microsoft.Outlook",
        "4.2405.0",
        "VPP",
    )
    assert apple["package_name"] is None and apple["device_families"] is None
    assert table.column("bundle_id").null_count == len(android)
