"""Unit tests of the source's pure parts: page -> Arrow, early stop, Data Tap typing and polling."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from sources.esper.arrow import to_arrow
from sources.esper.datatap import DataTapError, result_to_arrow, run_query, table_name
from sources.esper.pagination import Page
from sources.esper.scan import DescScan
from sources.esper.schemas import SCHEMAS


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
    table = to_arrow(records, SCHEMAS["devices"])
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
    a = to_arrow([{"id": "1", "version_code": "1"}], SCHEMAS["device_apps"], row_hash=True)
    b = to_arrow([{"version_code": "1", "id": "1"}], SCHEMAS["device_apps"], row_hash=True)
    c = to_arrow([{"id": "1", "version_code": "2"}], SCHEMAS["device_apps"], row_hash=True)
    assert a.column("_row_hash") == b.column("_row_hash")
    assert a.column("_row_hash") != c.column("_row_hash")


def _page(*stamps: str) -> Page:
    return Page([{"created_at": s} for s in stamps], None, None, None, True)


def test_early_stop_only_while_order_is_descending() -> None:
    stop = datetime(2026, 10, 5, tzinfo=UTC)
    ordered = DescScan("created_at", stop)
    pages = [_page("2026-10-09T00:00:00Z", "2026-10-07T00:00:00Z"), _page("2026-10-04T00:00:00Z")]
    pages.append(_page("2026-10-01T00:00:00Z"))
    read = list(ordered.pages(pages))
    assert len(read) == 2 and ordered.stopped  # the third page is never requested

    shuffled = DescScan("created_at", stop)
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

    def post(self, path: str, json: dict) -> dict:
        self.posts += 1
        return {"content": {"id": f"job{self.posts}", "status": "PENDING"}}

    def get(self, path: str, params: dict | None = None) -> dict:
        state = self.states.pop(0) if self.states else "RUNNING"
        result = {"schema": {"columns": []}, "data_array": [], "truncated": state == "TRUNC"}
        return {
            "content": {
                "status": "SUCCEEDED" if state == "TRUNC" else state,
                "error_message": "boom" if state == "FAILED" else None,
                "result": result if state in ("SUCCEEDED", "TRUNC") else None,
            }
        }


def test_data_tap_polling_resubmits_stuck_jobs_and_fails_clearly() -> None:
    clock = iter(range(0, 10_000, 10))
    tap = _FakeTap([])
    with pytest.raises(DataTapError, match=r"still (PENDING|RUNNING) after 100 s"):
        run_query(tap, "q", "select 1", deadline_s=100, stuck_s=30, row_limit=10,  # type: ignore[arg-type]
                  sleep=lambda s: None, clock=lambda: next(clock))  # fmt: skip
    assert tap.posts >= 2  # resubmitted while stuck
    failed = _FakeTap(["RUNNING", "FAILED"])
    with pytest.raises(DataTapError, match="FAILED: boom"):
        run_query(failed, "q", "select 1", deadline_s=100, stuck_s=30, row_limit=10,  # type: ignore[arg-type]
                  sleep=lambda s: None)  # fmt: skip
