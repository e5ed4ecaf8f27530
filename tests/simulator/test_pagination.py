"""Offset and cursor modes of /v2/devices/ and the other lists: complete, no duplicates, as the
references describe them (live §1, §12, §13; the OpenAPI subset's parameters). Every expected
value is read from the API's own answers (`count`, the items), never from the simulator's truth.
"""

from __future__ import annotations

import base64
import json

import pytest
from esper_warehouse.pipelines.shapes import openapi_document

from tests.conftest import ENTERPRISE_ID

DEVICES = openapi_document()["paths"]["/v2/devices/"]["get"]


def _offset_ids(client, limit: int) -> tuple[list[str], int]:
    ids, url, params, count = [], "/v2/devices/", {"limit": limit}, None
    while url:
        body = client.get(url, params=params).json()["content"]
        count = body["count"] if count is None else count
        ids += [d["id"] for d in body["results"]]
        url, params = body["next"], None
        if url:
            assert url.startswith(client.base_url.scheme + "://"), "live §12: next is absolute"
    return ids, count


def _cursor_ids(client, limit: int) -> list[str]:
    ids, cursor = [], "start"
    while True:
        body = client.get("/v2/devices/", params={"cursor": cursor, "limit": limit}).json()[
            "content"
        ]
        ids += [d["id"] for d in body["results"]]
        if not body["has_more"]:
            assert body["next_cursor"] is None, "subset: next_cursor null if no more results"
            return ids
        cursor = body["next_cursor"]


@pytest.mark.parametrize("limit", [1, 7, 100, 1000])
def test_offset_and_cursor_return_the_same_devices(client, limit):
    offset_ids, count = _offset_ids(client, max(limit, 7))
    assert len(offset_ids) == len(set(offset_ids)) == count, "every device once, `count` of them"
    cursor_ids = _cursor_ids(client, limit)
    assert len(cursor_ids) == len(set(cursor_ids)) == count
    assert set(cursor_ids) == set(offset_ids)


def test_cursor_order_is_the_documented_keyset(client):
    """The subset's example `next_cursor` is base64 JSON of its keyset: `updated_at` DESC (then
    the device id), so cursor pages run newest-updated first."""
    schema = openapi_document()["components"]["schemas"]["CursorPaginatedDeviceList"]
    example = json.loads(base64.b64decode(schema["properties"]["next_cursor"]["example"]))
    assert [(k["c"], k["o"]) for k in example["sv"]] == [("updated_at", "DESC")]
    results = client.get("/v2/devices/", params={"cursor": "start", "limit": 1000}).json()[
        "content"
    ]["results"]
    stamps = [d["updated_at"] for d in results]
    assert stamps == sorted(stamps, reverse=True), "the subset's example cursor: updated_at DESC"
    assert len({d["id"] for d in results}) == len(results)


def test_prev_cursor_walks_back_to_the_same_page(client):
    """Subset CursorPaginatedDeviceList: `prev_cursor` null on the first page, and passed as
    `cursor` it pages backward."""
    first = client.get("/v2/devices/", params={"cursor": "start", "limit": 25}).json()["content"]
    assert first["has_prev"] is False and first["prev_cursor"] is None
    second = client.get("/v2/devices/", params={"cursor": first["next_cursor"], "limit": 25}).json()
    back = client.get(
        "/v2/devices/", params={"cursor": second["content"]["prev_cursor"], "limit": 25}
    )
    assert [d["id"] for d in back.json()["content"]["results"]] == [
        d["id"] for d in first["results"]
    ]


def test_limit_above_1000_is_clamped(client):
    """Live §13: the documented maximum is 1000 (subset: `limit` maximum 1000)."""
    limit = next(p for p in DEVICES["parameters"] if p.get("name") == "limit")
    assert limit["schema"]["maximum"] == 1000
    body = client.get("/v2/devices/", params={"limit": 5000}).json()["content"]
    assert len(body["results"]) == min(1000, body["count"])
    cursor = client.get("/v2/devices/", params={"limit": 5000, "cursor": "start"}).json()
    assert len(cursor["content"]["results"]) <= 1000
    groups = client.get(
        f"/enterprise/{ENTERPRISE_ID}/devicegroup/", params={"limit": 100_000}
    ).json()
    assert len(groups["results"]) == min(1000, groups["count"])


def test_legacy_next_links_are_absolute_and_followable(client, shared_sim):
    """Live §12: next links are absolute, on the API host, with the `/api` prefix."""
    url = f"/enterprise/{ENTERPRISE_ID}/devicegroup/"
    seen, params, count = [], {"limit": 3}, None
    while url:
        body = client.get(url, params=params).json()
        count = body["count"] if count is None else count
        seen += [g["id"] for g in body["results"]]
        url, params = body["next"], None
        assert url is None or url.startswith(shared_sim.base_url), "live §12"
    assert len(seen) == len(set(seen)) == count


def test_default_page_sizes(client):
    """The subset's defaults: `/v2/devices/` 10, the legacy device list 20, an event feed 250,
    "ordered by date the event was created on"."""
    assert len(client.get("/v2/devices/").json()["content"]["results"]) == 10
    legacy = client.get(f"/enterprise/{ENTERPRISE_ID}/device/").json()
    assert len(legacy["results"]) == min(20, legacy["count"])
    device = legacy["results"][0]["id"]
    feed = client.get(f"/enterprise/{ENTERPRISE_ID}/device/{device}/download/eventfeed/").json()
    assert feed["count"] and len(feed["results"]) == min(250, feed["count"])
    stamps = [e["created_on"] for e in feed["results"]]
    assert stamps in (sorted(stamps), sorted(stamps, reverse=True)), "ordered by created_on"


def test_filters(client):
    """The subset's `/v2/devices/` filters: `platform`, `os`, `serial`, `state`, `group_multi`
    ("the IDs and its subgroup") and `ordering` ("prefix with '-' to reverse")."""
    every = client.get("/v2/devices/", params={"limit": 1000}).json()["content"]
    devices = every["results"]
    assert len(devices) == every["count"]
    platforms = {d["platform"] for d in devices}
    counted = 0
    for platform in platforms:
        page = client.get("/v2/devices/", params={"platform": platform, "limit": 1000}).json()
        assert {d["platform"] for d in page["content"]["results"]} == {platform}
        counted += page["content"]["count"]
    assert counted == every["count"]
    ipad = client.get("/v2/devices/", params={"os": "iPadOS", "limit": 1000}).json()["content"]
    assert ipad["results"] and {d["os"] for d in ipad["results"]} == {"iPadOS"}
    one = devices[5]
    by_serial = client.get("/v2/devices/", params={"serial": one["serial"]}).json()["content"]
    assert [d["id"] for d in by_serial["results"]] == [one["id"]]
    disabled = client.get("/v2/devices/", params={"state": "20", "limit": 1000}).json()["content"]
    assert disabled["count"] == sum(d["state"] == 20 for d in devices) > 0
    root = client.get(f"/enterprise/{ENTERPRISE_ID}/devicegroup/", params={"limit": 1000})
    root_id = next(g["id"] for g in root.json()["results"] if not g.get("parent"))
    everyone = client.get("/v2/devices/", params={"group_multi": root_id, "limit": 1000})
    # every device in a group is under the root; a few Android devices are in none (live §4)
    grouped = [d for d in devices if d["group_id"] is not None]
    assert 0 < len(grouped) < len(devices)
    assert everyone.json()["content"]["count"] == len(grouped)
    ordered = client.get("/v2/devices/", params={"ordering": "-battery_level", "limit": 1000})
    levels = [
        d["battery_stats"]["battery_level"]
        for d in ordered.json()["content"]["results"]
        if "battery_stats" in d
    ]
    assert levels == sorted(levels, reverse=True)
