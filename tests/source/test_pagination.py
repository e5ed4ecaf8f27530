"""Unit tests of the list envelopes and the paginators, against small fake list APIs.

The fake APIs run inside `httpx.MockTransport` (no network); every request still goes through the
real `EsperClient`, so its origin checks apply to the `next` links.
"""

from __future__ import annotations

import random
import re
import threading
import time
import tracemalloc
from typing import Any

import httpx
import pytest
from esper_warehouse.sources.esper.http import EsperClient, EsperConfigError, EsperResponseError
from esper_warehouse.sources.esper.http.pages import (
    Page,
    iter_pages,
    iter_pages_parallel,
    parse_page,
    read_all,
)
from esper_warehouse.sources.esper.http.paginators import (
    LinkPaginator,
    OffsetPaginator,
    SinglePage,
)
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.access import ROLES
from esper_warehouse.sources.esper.tables.credentials import PROVISIONING_PROFILES
from esper_warehouse.sources.esper.tables.devices import DEVICES

from tests.live_shapes import route, routes, synthesize

BASE = "https://acme-api.esper.cloud/api"
KEY = "sk-test-0123456789"


def records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i:05d}", "n": i} for i in range(n)]


class OffsetAPI:
    """A list served with `limit`/`offset` in the legacy or v0/v2 envelope, with `next` links.

    Args:
        rows: The records (the test may change the list between requests).
        envelope: ``"legacy"`` (``{count, next, previous, results}``), ``"v0"`` (``content`` with
            ``previous``), ``"v2"`` (``content`` with ``prev``) or ``"roles"`` (``{count,
            roles}``, no links).
        max_limit: The largest page the API serves (it clamps silently).
    """

    def __init__(
        self, rows: list[dict[str, Any]], envelope: str = "legacy", max_limit: int = 1000
    ) -> None:
        self.rows = rows
        self.envelope = envelope
        self.max_limit = max_limit
        self.requests: list[httpx.URL] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request.url)
        params = request.url.params
        limit = min(int(params.get("limit", 20)), self.max_limit)
        offset = int(params.get("offset", 0))
        return httpx.Response(200, json=self.body(request.url, offset, limit))

    def body(self, url: httpx.URL, offset: int, limit: int) -> dict[str, Any]:
        chunk = self.rows[offset : offset + limit]
        more = offset + limit < len(self.rows)
        page_url = url.copy_set_param("limit", limit)
        nxt = str(page_url.copy_set_param("offset", offset + limit)) if more else None
        prev = str(page_url.copy_set_param("offset", max(0, offset - limit))) if offset else None
        if self.envelope == "legacy":
            return {"count": len(self.rows), "next": nxt, "previous": prev, "results": chunk}
        if self.envelope == "roles":  # authz2: `{count, roles}`, no links
            return {"count": len(self.rows), "roles": chunk}
        prev_key = "previous" if self.envelope == "v0" else "prev"
        content = {"count": len(self.rows), "next": nxt, prev_key: prev, "results": chunk}
        return {"code": 200, "message": "success", "content": content}


class CursorAPI(OffsetAPI):
    """`/v2/devices/` in cursor mode; optionally switches to the offset shape after `switch_after`
    cursor pages (the route is a documented union of both)."""

    def __init__(self, rows: list[dict[str, Any]], switch_after: int | None = None) -> None:
        super().__init__(rows, envelope="v2")
        self.switch_after = switch_after
        self.cursor_pages = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request.url)
        params = request.url.params
        limit = min(int(params.get("limit", 10)), self.max_limit)
        cursor = params.get("cursor")
        if cursor is None or self.switch_after == self.cursor_pages:
            offset = int(params.get("offset", 0))
            if cursor is not None:  # switching: continue where the cursor was
                offset = 0 if cursor == "start" else int(cursor.removeprefix("at-"))
            url = request.url.copy_remove_param("cursor")
            return httpx.Response(200, json=self.body(url, offset, limit))
        self.cursor_pages += 1
        offset = 0 if cursor == "start" else int(cursor.removeprefix("at-"))
        chunk = self.rows[offset : offset + limit]
        more = offset + limit < len(self.rows)
        content = {
            "results": chunk,
            "next_cursor": f"at-{offset + limit}" if more else None,
            "prev_cursor": f"at-{max(0, offset - limit)}" if offset else None,
            "has_more": more,
            "has_prev": offset > 0,
        }
        return httpx.Response(200, json={"content": content})


def client_for(handler: Any, **kwargs: Any) -> EsperClient:
    options: dict[str, Any] = {"sleep": lambda s: None, "rng": random.Random(1)}
    options.update(kwargs)
    return EsperClient(BASE, KEY, transport=httpx.MockTransport(handler), **options)


def all_items(pages: list[Page]) -> list[dict[str, Any]]:
    return [item for page in pages for item in page.items]


# -------------------------------------------------------------------------------- parse_page


def test_parse_legacy_envelope() -> None:
    page = parse_page(
        {"count": 45, "next": f"{BASE}/x/?offset=20", "previous": None, "results": [{"id": 1}]}
    )
    assert page == Page([{"id": 1}], 45, f"{BASE}/x/?offset=20", None, True)


@pytest.mark.parametrize("prev_key", ["previous", "prev"])
def test_parse_v0_v2_envelope(prev_key: str) -> None:
    body = {
        "code": 200,
        "message": "success",
        "content": {"count": 2, "next": None, prev_key: None, "results": [{"id": 1}, {"id": 2}]},
    }
    assert parse_page(body) == Page([{"id": 1}, {"id": 2}], 2, None, None, False)


def test_parse_v2_envelope_without_code_or_message() -> None:
    page = parse_page({"content": {"count": 0, "next": None, "prev": None, "results": []}})
    assert page == Page([], 0, None, None, False)


def test_parse_cursor_envelope() -> None:
    body = {
        "content": {
            "results": [{"id": "a"}],
            "next_cursor": "eyJ1cGRhdGVkX2F0Ijo",
            "prev_cursor": None,
            "has_more": True,
            "has_prev": False,
        }
    }
    assert parse_page(body) == Page([{"id": "a"}], None, None, "eyJ1cGRhdGVkX2F0Ijo", True)
    last = {"content": {"results": [], "next_cursor": None, "has_more": False}}
    assert parse_page(last) == Page([], None, None, None, False)


def test_parse_reads_the_shape_that_came_back_not_the_one_asked_for() -> None:
    # /v2/devices/ asked for cursors may answer in the offset shape, and the other way round.
    offset_shaped = {
        "content": {"count": 30, "next": f"{BASE}/v2/devices/?offset=10", "prev": None}
    }
    offset_shaped["content"]["results"] = [{"id": "a"}]
    page = parse_page(offset_shaped)
    assert (page.next_url, page.next_cursor, page.count, page.has_more) == (
        f"{BASE}/v2/devices/?offset=10",
        None,
        30,
        True,
    )


def _is_list(observed: dict) -> bool:
    return "results" in observed.get("content", observed)


def test_an_empty_v2_list_is_results_null() -> None:
    """Live §2: `/v2/devices/{id}/device-apps/` answered an empty list with `results: null`."""
    body = synthesize(route("GET", "/v2/devices/{deviceId}/device-apps/")["observed"])
    body["content"]["count"] = 0
    page = parse_page(body, where="/v2/devices/x/device-apps/")
    assert (page.items, page.count, page.next_url, page.has_more) == ([], 0, None, False)


@pytest.mark.parametrize(
    "recorded",
    [r for r in routes() if isinstance(r["observed"], dict) and _is_list(r["observed"])],
    ids=lambda r: f"{r['n']}:{r['path']}",
)
def test_every_live_list_shape_parses(recorded: dict) -> None:
    """Each list the live API answered (synthesised from its type map) is read as a page."""
    body = synthesize(recorded["observed"])
    envelope = body.get("content", body)
    if "count" in envelope and recorded["count"] is not None:
        envelope["count"] = recorded["count"]  # the recorded total (0 for the empty v2 list)
    page = parse_page(body, where=recorded["path"])
    expected = envelope["results"] if envelope["results"] is not None else []
    assert page.items == expected
    assert page.has_more == bool(envelope.get("next"))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ([{"id": 1}], "expected a JSON object"),
        ({"count": 1, "next": None}, "no 'results'"),
        ({"content": {"count": 1}}, "no 'results'"),
        ({"code": 200, "content": "oops"}, "'content' is str"),
        ({"count": 1, "results": {"id": 1}}, "not a list"),
        ({"content": {"results": None}}, "not a list"),
        ({"content": {"count": 5, "next": None, "prev": None, "results": None}}, "not a list"),
        ({"results": [1, 2]}, "other than objects"),
        ({"count": "many", "results": []}, "'count'"),
        ({"next": 5, "results": []}, "'next'"),
        ({"content": {"results": [], "has_more": True}}, "no 'next_cursor'"),
    ],
)
def test_parse_rejects_malformed_pages_clearly(body: Any, problem: str) -> None:
    with pytest.raises(EsperResponseError, match=problem) as caught:
        parse_page(body, where="/v2/devices/")
    assert "/v2/devices/" in str(caught.value)


# -------------------------------------------------------------------------------- iter_pages


@pytest.mark.parametrize("envelope", ["legacy", "v0", "v2"])
def test_iter_pages_follows_next_links_to_the_end(envelope: str) -> None:
    api = OffsetAPI(records(45), envelope=envelope)
    client = client_for(api)
    pages = list(iter_pages(client, "/enterprise/e/devicegroup/", {"name": "x"}, limit=20))
    assert [len(p.items) for p in pages] == [20, 20, 5]
    assert all_items(pages) == records(45)
    assert all(p.count == 45 for p in pages)  # kept for reconciliation
    first = api.requests[0].params
    assert (first["limit"], first["offset"], first["name"]) == ("20", "0", "x")
    assert [u.params["offset"] for u in api.requests] == ["0", "20", "40"]
    assert all(u.params["name"] == "x" for u in api.requests)  # links carry the filters


def test_a_linkless_list_is_walked_by_offset_until_its_count() -> None:
    """authz2 roles: `{count, roles}` with no links, declared so (`ROLES.paginator`); the next
    offset until `count` items came, page by page or planned from the count (the API may clamp
    the page size)."""
    assert ROLES.paginator is OffsetPaginator
    api = OffsetAPI(records(45), envelope="roles", max_limit=20)
    pages = list(iter_pages(client_for(api), ROLES.path, limit=50, paginator=OffsetPaginator))
    assert [len(p.items) for p in pages] == [20, 20, 5]
    assert all_items(pages) == records(45)
    assert [u.params["offset"] for u in api.requests] == ["0", "20", "40"]
    api = OffsetAPI(records(45), envelope="roles", max_limit=20)
    pages = list(
        iter_pages_parallel(client_for(api), ROLES.path, limit=50, paginator=OffsetPaginator)
    )
    assert all_items(pages) == records(45)
    assert sorted(int(u.params["offset"]) for u in api.requests) == [0, 20, 40]
    one = OffsetAPI(records(3), envelope="roles")
    walked = iter_pages(client_for(one), ROLES.path, limit=50, paginator=OffsetPaginator)
    assert all_items(walked) == records(3)
    assert len(one.requests) == 1


def test_a_list_that_pages_otherwise_than_declared_fails_instead_of_ending_short() -> None:
    """Paging is declared, not guessed: a list declared to page by links (the default) that
    answers a count without links, or a cursor, is refused naming both, never read short."""
    roles = OffsetAPI(records(45), envelope="roles", max_limit=20)
    with pytest.raises(EsperResponseError, match="count without links shape, which its link"):
        list(iter_pages(client_for(roles), ROLES.path, limit=50))
    devices = CursorAPI(records(25))

    def cursors_only(request: httpx.Request) -> httpx.Response:  # whatever was asked for
        url = request.url.copy_set_param("cursor", request.url.params.get("cursor", "start"))
        return devices(httpx.Request("GET", url))

    with pytest.raises(EsperResponseError, match="cursor shape, which its offset paginator"):
        list(
            iter_pages(
                client_for(cursors_only), "/v2/devices/", limit=10, paginator=OffsetPaginator
            )
        )


def test_iter_pages_follows_the_page_size_the_api_clamped_to() -> None:
    api = OffsetAPI(records(2500), max_limit=1000)
    pages = list(iter_pages(client_for(api), "/v2/tenant-apps/", limit=5000))
    assert [len(p.items) for p in pages] == [1000, 1000, 500]
    assert all_items(pages) == records(2500)


def test_iter_pages_stops_on_an_empty_page_even_with_a_next_link() -> None:
    def empty_forever(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset", 0))
        nxt = str(request.url.copy_set_param("offset", offset + 20))
        results = [{"id": 1}] if offset == 0 else []
        return httpx.Response(200, json={"count": 99, "next": nxt, "results": results})

    client = client_for(empty_forever)
    pages = list(iter_pages(client, "/v2/groups/", limit=20))
    assert len(pages) == 1
    assert client.totals().requests == 2
    assert list(iter_pages(client_for(OffsetAPI([])), "/v2/groups/", limit=20)) == []


def test_iter_pages_refuses_a_link_that_loops() -> None:
    def loop(request: httpx.Request) -> httpx.Response:
        nxt = f"{BASE}/v2/groups/?limit=20&offset=20"
        return httpx.Response(200, json={"count": 99, "next": nxt, "results": [{"id": 1}]})

    with pytest.raises(EsperResponseError, match="same next page twice"):
        list(iter_pages(client_for(loop), "/v2/groups/", limit=20))


def test_iter_pages_refuses_a_next_link_to_another_origin_without_requesting_it() -> None:
    hosts: list[str] = []

    def leaky(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        nxt = "https://collector.evil.example/api/v2/groups/?offset=20"
        return httpx.Response(200, json={"count": 99, "next": nxt, "results": [{"id": 1}]})

    pages = iter_pages(client_for(leaky), "/v2/groups/", limit=20)
    assert len(next(pages).items) == 1
    with pytest.raises(EsperConfigError, match="refusing to follow"):
        next(pages)
    assert hosts == ["acme-api.esper.cloud"]


def test_iter_pages_resolves_a_relative_next_link_against_the_page() -> None:
    api = OffsetAPI(records(30))

    def relative_links(request: httpx.Request) -> httpx.Response:
        response = api(request)
        body = response.json()
        if body["next"]:
            body["next"] = body["next"].removeprefix("https://acme-api.esper.cloud")
        return httpx.Response(200, json=body)

    pages = list(iter_pages(client_for(relative_links), "/v2/groups/", limit=20))
    assert all_items(pages) == records(30)


# ------------------------------------------------------------ the device list's declared cursors


def device_pages(client: EsperClient, params: dict | None = None, *, limit: int) -> list[Page]:
    """The device list walked as the scan walks it: `iter_pages` with the paginator its table
    declares (`DEVICES.paginator`)."""
    return list(iter_pages(client, DEVICES.path, params, limit=limit, paginator=DEVICES.paginator))


def test_the_device_list_walks_cursors_while_has_more() -> None:
    api = CursorAPI(records(25))
    pages = device_pages(client_for(api), {"state": 1}, limit=10)
    assert all_items(pages) == records(25)
    assert [p.has_more for p in pages] == [True, True, False]
    assert all(p.count is None for p in pages)
    assert [u.params["cursor"] for u in api.requests] == ["start", "at-10", "at-20"]
    assert all(u.params["limit"] == "10" and u.params["state"] == "1" for u in api.requests)
    assert all("offset" not in u.params for u in api.requests)


def test_the_device_list_continues_by_next_links_when_the_shape_switches_to_offset() -> None:
    api = CursorAPI(records(35), switch_after=1)
    pages = device_pages(client_for(api), limit=10)
    assert all_items(pages) == records(35)
    assert pages[0].next_cursor == "at-10"
    assert pages[1].count == 35 and pages[1].next_url is not None
    assert [u.params.get("cursor") for u in api.requests] == ["start", "at-10", None, None]


def test_the_device_list_when_the_server_answers_offset_shape_from_the_start() -> None:
    api = CursorAPI(records(25), switch_after=0)
    pages = device_pages(client_for(api), limit=10)
    assert all_items(pages) == records(25)
    assert all(p.count == 25 and p.next_cursor is None for p in pages)


def test_the_device_list_refuses_a_repeated_cursor() -> None:
    def stuck(request: httpx.Request) -> httpx.Response:
        content = {"results": [{"id": 1}], "next_cursor": "same", "has_more": True}
        return httpx.Response(200, json={"content": content})

    with pytest.raises(EsperResponseError, match="same next page twice"):
        device_pages(client_for(stuck), limit=10)


def test_a_device_page_its_cursor_paginator_cannot_follow_fails_the_walk() -> None:
    """A page saying more follows with neither a cursor nor a `next` link (a count without
    links) is refused naming the declared paginator, never read as the list's end."""
    asked: list[httpx.URL] = []

    def counted_without_links(request: httpx.Request) -> httpx.Response:
        asked.append(request.url)
        return httpx.Response(200, json={"count": 30, "roles": records(10)})

    with pytest.raises(
        EsperResponseError, match="count without links shape, which its cursor paginator"
    ):
        device_pages(client_for(counted_without_links), limit=10)
    assert len(asked) == 1 and asked[0].params["cursor"] == "start"


# ----------------------------------------------------------------------- iter_pages_parallel


def test_iter_pages_parallel_yields_every_page_in_offset_order() -> None:
    api = OffsetAPI(records(95), envelope="v2")

    def late_early_pages(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset", 0))
        time.sleep((100 - offset) / 10_000)  # later offsets answer first
        return api(request)

    client = client_for(late_early_pages, initial_concurrency=8)
    pages = list(iter_pages_parallel(client, "/v2/blueprints/", {"q": "x"}, limit=10))
    assert all_items(pages) == records(95)
    assert [len(p.items) for p in pages] == [10] * 9 + [5]
    assert pages[0].count == 95
    offsets = sorted(int(u.params["offset"]) for u in api.requests)
    assert offsets == list(range(0, 100, 10))  # each page once, no link following
    assert all(u.params["q"] == "x" for u in api.requests)


def test_iter_pages_parallel_holds_a_bounded_number_of_pages_behind_a_late_one() -> None:
    """A page that answers late does not make the walk read the whole list into memory: the
    pages after it wait for it, a bounded number of them (150,000 devices of the legacy list,
    read whole behind one late page, were 1 GB)."""
    api = OffsetAPI(records(400), envelope="v2")
    others_answered = threading.Event()
    answered: list[int] = []

    def late_second_page(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("offset", 0))
        if offset == 10:  # answers once every other page is answered, or after a second
            others_answered.wait(timeout=1.0)
        response = api(request)
        with api.lock:
            answered.append(offset)
            if len(answered) == 39:
                others_answered.set()
        return response

    client = client_for(late_second_page, initial_concurrency=8)
    held = []
    pages = []
    for page in iter_pages_parallel(client, "/v2/blueprints/", limit=10):
        pages.append(page)
        with api.lock:
            held.append(len(answered) - len(pages))  # answered, not yet handed on
    assert all_items(pages) == records(400)
    assert max(held) <= 2 * 8  # twice the requests in flight, not the 38 pages after it


def test_iter_pages_parallel_uses_the_page_size_the_api_really_served() -> None:
    api = OffsetAPI(records(95), max_limit=10)
    pages = list(iter_pages_parallel(client_for(api), "/v2/blueprints/", limit=50))
    assert all_items(pages) == records(95)
    assert len(api.requests) == 10


def test_iter_pages_parallel_follows_links_when_the_list_grew_while_paging() -> None:
    api = OffsetAPI(records(95))
    grown = threading.Event()

    def growing(request: httpx.Request) -> httpx.Response:
        response = api(request)
        if not grown.is_set():  # 15 records appended right after the first page
            grown.set()
            api.rows = records(110)
        return response

    pages = list(iter_pages_parallel(client_for(growing), "/v2/blueprints/", limit=10))
    assert all_items(pages) == records(110)
    assert pages[0].count == 95 and pages[-1].count == 110


def test_iter_pages_parallel_walks_a_cursor_list_page_by_page() -> None:
    api = CursorAPI(records(25))  # cursor shape: no count to plan offsets from
    pages = list(
        iter_pages_parallel(client_for(api), DEVICES.path, limit=10, paginator=DEVICES.paginator)
    )
    assert all_items(pages) == records(25)
    assert api.requests[0].params["cursor"] == "start"


def test_iter_pages_parallel_on_an_empty_or_single_page_list() -> None:
    assert list(iter_pages_parallel(client_for(OffsetAPI([])), "/v2/x/", limit=10)) == []
    pages = list(iter_pages_parallel(client_for(OffsetAPI(records(7))), "/v2/x/", limit=10))
    assert all_items(pages) == records(7)


def test_iter_pages_parallel_propagates_a_malformed_page() -> None:
    api = OffsetAPI(records(50))

    def broken_page(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("offset") == "30":
            return httpx.Response(200, json={"count": 50, "next": None})
        return api(request)

    with pytest.raises(EsperResponseError, match="no 'results'"):
        list(iter_pages_parallel(client_for(broken_page), "/v2/x/", limit=10))


# ---------------------------------------------------------------------- walks that never end


class IgnoresOffset(OffsetAPI):
    """Always the first page, with `next` = offset + limit: 17 groups read forever, before."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            self.requests.append(request.url)
        assert len(self.requests) < 50, "the walk did not stop"
        offset = int(request.url.params.get("offset", 0))
        body = self.body(request.url, 0, 5)
        body["next"] = str(
            request.url.copy_set_param("limit", 5).copy_set_param("offset", offset + 5)
        )
        return httpx.Response(200, json=body)


@pytest.mark.parametrize("walk", [iter_pages, iter_pages_parallel])
def test_a_list_that_ignores_offset_stops_with_a_clear_error(walk: Any) -> None:
    api = IgnoresOffset(records(17))
    with pytest.raises(EsperResponseError, match="keeps sending items it already sent") as caught:
        list(walk(client_for(api), "/enterprise/e/devicegroup/", limit=5))
    assert "count of 17" in str(caught.value)
    assert len(api.requests) <= 4  # the first page, two repeats (and one planned page)


def test_read_all_of_a_list_that_ignores_offset_fails_instead_of_looping() -> None:
    api = IgnoresOffset(records(17))
    with pytest.raises(EsperResponseError, match="already sent"):
        read_all(client_for(api), "/enterprise/e/devicegroup/", limit=5)
    assert len(api.requests) <= 10


def test_a_cursor_list_serving_the_same_page_under_new_cursors_stops() -> None:
    requests: list[str] = []

    def same_page(request: httpx.Request) -> httpx.Response:
        requests.append(request.url.params["cursor"])
        assert len(requests) < 50, "the walk did not stop"
        content = {
            "results": records(10),
            "next_cursor": f"c{len(requests)}",
            "has_more": True,
        }
        return httpx.Response(200, json={"content": content})

    with pytest.raises(EsperResponseError, match="keeps sending items it already sent"):
        device_pages(client_for(same_page), limit=10)
    assert requests == ["start", "c1", "c2"]


def test_a_list_sending_far_more_items_than_its_count_stops() -> None:
    served = 0

    def endless(request: httpx.Request) -> httpx.Response:
        nonlocal served
        assert served < 500, "the walk did not stop"
        chunk = [{"id": f"x{served + i}"} for i in range(10)]
        served += 10
        nxt = f"{BASE}/v2/blueprints/?limit=10&offset={served}"
        return httpx.Response(200, json={"count": 30, "next": nxt, "results": chunk})

    with pytest.raises(EsperResponseError, match="sent 90 items for a count of 30"):
        list(iter_pages(client_for(endless), "/v2/blueprints/", limit=10))
    assert served == 90


def test_one_page_of_repeats_from_a_moving_window_is_not_a_loop() -> None:
    # Ten records inserted at the head right after the first page: the second page repeats the
    # first one's items, the walk goes on and reads every original record.
    api = OffsetAPI(records(30))

    def inserts(request: httpx.Request) -> httpx.Response:
        response = api(request)
        if len(api.requests) == 1:
            api.rows = [{"id": f"new{i}", "n": -i} for i in range(10)] + api.rows
        return response

    pages = list(iter_pages(client_for(inserts), "/v2/blueprints/", limit=10))
    ids = {item["id"] for item in all_items(pages)}
    assert {r["id"] for r in records(30)} <= ids
    assert len(pages) == 4


def test_iter_pages_parallel_stops_at_the_end_of_a_list_whose_count_is_wrong() -> None:
    api = OffsetAPI(records(25))

    def huge_count(request: httpx.Request) -> httpx.Response:
        assert len(api.requests) < 200, "the walk did not stop"
        body = api(request).json()
        body["count"] = 10**9  # 100 million pages planned at 10 a page
        return httpx.Response(200, json=body)

    client = client_for(huge_count, initial_concurrency=4, max_concurrency=4)
    pages = list(iter_pages_parallel(client, "/v2/blueprints/", limit=10))
    assert all_items(pages) == records(25)
    assert len(api.requests) <= 3 + 2 * 4  # the list's pages, then at most a window in flight


def test_a_list_repeating_one_id_on_every_item_is_read_to_its_end() -> None:
    # Blueprint versions carry their blueprint's `id`; each version is a new record all the same.
    versions = [{"id": "bp-1", "version_id": f"v{i:03d}"} for i in range(35)]
    for walk in (iter_pages, iter_pages_parallel):
        pages = list(
            walk(client_for(OffsetAPI(versions)), "/v2/blueprints/bp-1/versions/", limit=10)
        )
        assert all_items(pages) == versions


def test_read_all_of_a_list_serving_one_id_twice_keeps_it_once_and_counts_it_once() -> None:
    """Two records with one id in every pass: one item, counted once (not "missing"), the copy
    `prefer` picks kept (by default the last read)."""
    rows = [*records(6), {"id": "r00002", "n": -2}]
    path = PROVISIONING_PROFILES.path
    read = read_all(client_for(OffsetAPI(rows, envelope="v2")), path, limit=3)
    assert (len(read.items), read.count) == (6, 6)
    assert {i["id"]: i["n"] for i in read.items}["r00002"] == -2
    for rule, kept in ((min, -2), (max, 2)):
        chosen = read_all(
            client_for(OffsetAPI(rows, envelope="v2")),
            path,
            limit=3,
            prefer=lambda a, b, rule=rule: rule(a, b, key=lambda item: item["n"]),
        )
        assert {i["id"]: i["n"] for i in chosen.items}["r00002"] == kept


def test_read_all_for_a_field_of_each_item_holds_that_field_not_the_list() -> None:
    """A big list read for a few fields of each item (the legacy device list for patch levels,
    the device list for its ids) holds those, page by page, even behind a late page: its peak
    is a fraction of the list read whole."""
    rows = [{**row, "details": "x" * 4000} for row in records(5000)]
    api = OffsetAPI(rows, envelope="v2")

    def late_second_page(request: httpx.Request) -> httpx.Response:
        if int(request.url.params.get("offset", 0)) == 20:
            time.sleep(0.3)
        return api(request)

    def peak(**options: Any) -> tuple[int, list[Any]]:
        client = client_for(late_second_page, initial_concurrency=8)
        tracemalloc.start()
        try:
            read = read_all(client, "/v2/x/", limit=20, parallel=True, **options)
            return tracemalloc.get_traced_memory()[1], read.items
        finally:
            tracemalloc.stop()

    whole, items = peak()
    kept, ids = peak(keep=lambda item: item["id"])
    assert sorted(ids) == [item["id"] for item in items] == [row["id"] for row in rows]
    assert kept < whole / 2  # about a third: the walk itself (threads, pages in flight) remains


def test_read_all_counts_a_repeat_of_one_pass_only_as_a_moving_window_not_a_copy() -> None:
    """Pass one serves r00001 twice and r00005 never, pass two r00000 twice and r00005 never:
    no key is repeated in both passes, so the list is short by one (reconciliation says so)."""

    class Shifting(OffsetAPI):
        passes = 0

        def __call__(self, request: httpx.Request) -> httpx.Response:
            if int(request.url.params.get("offset", 0)) == 0:
                self.passes += 1
                twice = records(6)[1 if self.passes == 1 else 0]
                self.rows = [*records(5), twice]
            return super().__call__(request)

    short = read_all(client_for(Shifting(records(6), envelope="v2")), "/v2/x", limit=3)
    assert (len(short.items), short.count) == (5, 6)


# ------------------------------------------------------------------------- declared paging


def _template(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path).rstrip("/")


_LIVE = [
    (table, recorded)
    for table in TABLES.values()
    for recorded in routes()
    if recorded["method"] == "GET"
    and str(recorded.get("status")) == "200"
    and _template(recorded["path"]) == _template(table.path)
]


def test_the_tables_with_a_live_route_are_many() -> None:
    assert len({table.name for table, _ in _LIVE}) >= 12, [t.name for t, _ in _LIVE]


@pytest.mark.parametrize("table, recorded", _LIVE, ids=lambda x: getattr(x, "name", ""))
def test_every_table_declares_the_paging_its_route_answers_live(table: Any, recorded: dict) -> None:
    """A route the live API answered with a page and `next` links is walked by a paginator that
    follows them (links; or the cursor of `/v2/devices/`, which continues a page in the offset
    shape by its link); a route answered with one record or a bare array has no pages."""
    observed = recorded["observed"]
    envelope = observed.get("content", observed) if isinstance(observed, dict) else None
    if isinstance(envelope, dict) and "results" in envelope and "next" in envelope:
        assert issubclass(table.paginator, LinkPaginator), (table.name, table.paginator)
    else:
        assert table.paginator is SinglePage, (table.name, table.paginator)


def test_every_table_names_one_of_the_four_paginators() -> None:
    kinds = {table.name: table.paginator.kind for table in TABLES.values()}
    assert set(kinds.values()) == {"link", "cursor", "offset", "none"}, kinds
    assert kinds["devices"] == "cursor" and kinds["roles"] == "offset"


def test_a_cursor_after_a_followed_link_is_asked_on_the_list_path() -> None:
    """`/v2/devices/` may answer in either shape: after a page followed by its `next` link, a
    cursor page's next request goes to the list's path with the cursor, not to the link (whose
    query holds an offset)."""
    rows = records(3)
    asked: list[httpx.URL] = []

    def union(request: httpx.Request) -> httpx.Response:
        asked.append(request.url)
        params = request.url.params
        if params.get("cursor") == "start":  # offset shape, with a link
            link = f"{BASE}/v2/devices/?limit=1&offset=1"
            content = {"count": 3, "next": link, "prev": None, "results": rows[:1]}
        elif params.get("offset") == "1":  # cursor shape
            content = {"results": rows[1:2], "next_cursor": "c2", "has_more": True}
        else:
            content = {"results": rows[2:], "next_cursor": None, "has_more": False}
        return httpx.Response(200, json={"content": content})

    pages = device_pages(client_for(union), {"state": 1}, limit=1)
    assert all_items(pages) == rows
    last = asked[-1]
    assert last.path == "/api/v2/devices/" and "offset" not in last.params, last
    assert (last.params["cursor"], last.params["state"]) == ("c2", "1")
