"""Next-link faults: `next` on `http://`, or on another host of the same service (live §12).

Esper's own client rewrites such links onto the configured host before following them; these
faults let the client's tests meet them for real.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from esper_warehouse.simulator.faults import other_host, parse

from tests.conftest import API_KEY
from tests.simulator.conftest import make_client


def _next(body: dict) -> str:
    return (body.get("content") or body)["next"]


def test_links_follow_the_request_scheme_and_next_http_breaks_that(sim) -> None:
    tls = {"X-Forwarded-Proto": "https"}  # as seen behind a TLS proxy
    with make_client(sim) as c:
        plain = _next(c.get("/v2/devices/", params={"limit": 5}).json())
        proxied = _next(c.get("/v2/devices/", params={"limit": 5}, headers=tls).json())
        assert urlsplit(plain).scheme == "http" and urlsplit(proxied).scheme == "https"
        sim.set_faults([{"kind": "next_http", "route": "/v2/devices/"}])
        body = c.get("/v2/devices/", params={"limit": 5}, headers=tls).json()
        link = urlsplit(_next(body))
        assert link.scheme == "http"
        assert (link.netloc, link.path, link.query) == (
            urlsplit(proxied).netloc,
            urlsplit(proxied).path,
            urlsplit(proxied).query,
        )
        assert urlsplit(body["content"]["prev"] or "https://x").scheme == "https"  # only next
        # other routes keep their scheme
        legacy = c.get(f"/enterprise/{sim.enterprise_id}/device/", params={"limit": 5}, headers=tls)
        assert urlsplit(_next(legacy.json())).scheme == "https"


@pytest.mark.parametrize(
    ("fault", "expected_host"),
    [
        ({"kind": "next_foreign_host"}, "localhost"),
        ({"kind": "next_foreign_host", "link_host": "localhost"}, "localhost"),
    ],
)
def test_next_foreign_host_names_another_host_of_the_same_service(sim, fault, expected_host):
    sim.set_faults([{**fault, "route": "/commands/v0/commands/"}])
    with make_client(sim) as c:
        body = c.get("/commands/v0/commands/", params={"limit": 3}).json()
        link = urlsplit(_next(body))
        assert link.hostname == expected_host and link.port == sim.port
        assert body["content"]["count"] > 3
        # the foreign link still reaches the same service: page 2 of the same list
        page2 = httpx.get(
            _next(body), headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
        ).json()
        sim.clear_faults()
        expected = c.get("/commands/v0/commands/", params={"limit": 3, "offset": 3}).json()
        assert page2["content"]["results"] == expected["content"]["results"]


def test_other_host_defaults() -> None:
    assert other_host("127.0.0.1:8000") == "localhost:8000"
    assert other_host("localhost") == "127.0.0.1"
    assert other_host("acme-api.esper.cloud") == "other-acme-api.esper.cloud"
    assert parse({"kind": "next_http"}).kind == "next_http"


def test_next_http_can_name_another_scheme_for_loopback_tests(sim) -> None:
    sim.set_faults([{"kind": "next_http", "scheme": "https", "route": "/v0/operations/"}])
    with make_client(sim) as c:
        link = urlsplit(_next(c.get("/v0/operations/", params={"limit": 2}).json()))
    assert (link.scheme, link.hostname, link.port) == ("https", "127.0.0.1", sim.port)
