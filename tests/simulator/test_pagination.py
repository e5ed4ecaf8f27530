"""Offset and cursor modes of /v2/devices/ and the other lists: complete, no duplicates."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import ENTERPRISE_ID


def _offset_ids(client, limit: int) -> list[str]:
    ids, url, params = [], "/v2/devices/", {"limit": limit}
    while url:
        body = client.get(url, params=params).json()["content"]
        ids += [d["id"] for d in body["results"]]
        url, params = body["next"], None
        if url:
            assert url.startswith(client.base_url.scheme + "://"), "next must be absolute"
    return ids


def _cursor_ids(client, limit: int) -> list[str]:
    ids, cursor = [], "start"
    while True:
        body = client.get("/v2/devices/", params={"cursor": cursor, "limit": limit}).json()[
            "content"
        ]
        ids += [d["id"] for d in body["results"]]
        if not body["has_more"]:
            assert body["next_cursor"] is None
            return ids
        cursor = body["next_cursor"]


@pytest.mark.parametrize("limit", [1, 7, 100, 1000])
def test_offset_and_cursor_return_the_same_devices(client, shared_sim, limit):
    truth = {d["id"] for d in shared_sim.truth("devices")}
    offset_ids = _offset_ids(client, limit) if limit > 1 else None
    cursor_ids = _cursor_ids(client, limit)
    assert len(cursor_ids) == len(set(cursor_ids)) == len(truth)
    assert set(cursor_ids) == truth
    if offset_ids is not None:
        assert len(offset_ids) == len(set(offset_ids))
        assert set(offset_ids) == truth


def test_cursor_order_is_updated_at_desc_then_id(client):
    results = client.get("/v2/devices/", params={"cursor": "start", "limit": 1000}).json()[
        "content"
    ]
    keys = [(d["updated_at"], d["id"]) for d in results["results"]]
    for (ua, ia), (ub, ib) in itertools.pairwise(keys):
        assert ua > ub or (ua == ub and ia < ib)


def test_prev_cursor_walks_back_to_the_same_page(client):
    first = client.get("/v2/devices/", params={"cursor": "start", "limit": 25}).json()["content"]
    assert first["has_prev"] is False and first["prev_cursor"] is None
    second = client.get("/v2/devices/", params={"cursor": first["next_cursor"], "limit": 25}).json()
    back = client.get(
        "/v2/devices/", params={"cursor": second["content"]["prev_cursor"], "limit": 25}
    )
    assert [d["id"] for d in back.json()["content"]["results"]] == [
        d["id"] for d in first["results"]
    ]


def test_limit_above_1000_is_clamped(client, shared_sim):
    body = client.get("/v2/devices/", params={"limit": 5000}).json()["content"]
    assert len(body["results"]) == min(1000, len(shared_sim.truth("devices")))
    assert (
        len(
            client.get("/v2/devices/", params={"limit": 5000, "cursor": "start"}).json()["content"][
                "results"
            ]
        )
        <= 1000
    )
    feed_limit = client.get(
        f"/enterprise/{ENTERPRISE_ID}/devicegroup/", params={"limit": 100_000}
    ).json()
    assert len(feed_limit["results"]) == min(1000, feed_limit["count"])


def test_legacy_next_links_are_absolute_and_followable(client, shared_sim):
    url = f"/enterprise/{ENTERPRISE_ID}/devicegroup/"
    seen, params = [], {"limit": 3}
    while url:
        body = client.get(url, params=params).json()
        seen += [g["id"] for g in body["results"]]
        url, params = body["next"], None
        assert url is None or url.startswith(shared_sim.base_url)
    assert sorted(seen) == sorted(g["id"] for g in shared_sim.truth("groups"))


def test_default_page_sizes(client, shared_sim):
    assert len(client.get("/v2/devices/").json()["content"]["results"]) == 10
    assert len(client.get("/commands/v0/commands/").json()["content"]["results"]) == 20
    device = max(shared_sim.truth("device_events"), key=lambda e: e["id"])["device_id"]
    feed = client.get(f"/enterprise/{ENTERPRISE_ID}/device/{device}/download/eventfeed/").json()
    assert len(feed["results"]) == min(250, feed["count"])
    stamps = [e["created_on"] for e in feed["results"]]
    assert stamps == sorted(stamps, reverse=True), "event feed is newest first"


def test_filters(client, shared_sim):
    truth = shared_sim.truth("devices")
    android = client.get("/v2/devices/", params={"platform": "ANDROID", "limit": 1000}).json()
    assert android["content"]["count"] == sum(d["platform"] == "ANDROID" for d in truth)
    ipad = client.get("/v2/devices/", params={"os": "iPadOS", "limit": 1000}).json()["content"]
    assert {d["os"] for d in ipad["results"]} == {"iPadOS"}
    one = truth[5]
    by_serial = client.get("/v2/devices/", params={"serial": one["serial"]}).json()["content"]
    assert [d["id"] for d in by_serial["results"]] == [one["id"]]
    disabled = client.get("/v2/devices/", params={"state": "20", "limit": 1000}).json()["content"]
    assert disabled["count"] == sum(d["state"] == 20 for d in truth)
    root = shared_sim.truth("groups")[0]
    everyone = client.get("/v2/devices/", params={"group_multi": root["id"], "limit": 1000})
    # every device in a group is under the root; a few Android devices are in none (live §4)
    grouped = [d for d in truth if d["group_id"] is not None]
    assert 0 < len(grouped) < len(truth)
    assert everyone.json()["content"]["count"] == len(grouped)
    ordered = client.get("/v2/devices/", params={"ordering": "-battery_level", "limit": 1000})
    levels = [
        d["battery_stats"]["battery_level"]
        for d in ordered.json()["content"]["results"]
        if "battery_stats" in d
    ]
    assert levels == sorted(levels, reverse=True)
