"""`next` links on another host of the service (live §12), met on the simulator's real answers.

The simulator's `next_foreign_host` fault names another host in every `next` link of a list (the
link still works). The client follows such links on the configured origin only. On loopback,
127.0.0.0/8, ::1 and `localhost` count as one service (as `*.esper.cloud` hosts do for a tenant's
API host): a link there is moved onto the configured host and port, never sent where it points.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from esper_warehouse.sources.esper.http import EsperClient, EsperConfigError
from esper_warehouse.sources.esper.http.pages import iter_pages

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.source.test_client import LoopbackServer, Reply

COMMANDS = "/commands/v0/commands/"


def read_commands(sim: Any) -> list[dict]:
    with EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID) as client:
        return [item for page in iter_pages(client, COMMANDS, limit=5) for item in page.items]


def test_links_to_another_loopback_host_are_followed_on_ours_and_logged_once(
    sim: Any, caplog: pytest.LogCaptureFixture
) -> None:
    expected = read_commands(sim)
    assert len(expected) > 10  # several pages
    other = LoopbackServer(lambda seen: Reply(body={"results": []}))  # where the links point
    try:
        link_host = other.url.removeprefix("http://").replace("127.0.0.1", "localhost")
        sim.set_faults([{"kind": "next_foreign_host", "route": COMMANDS, "link_host": link_host}])
        with caplog.at_level(logging.INFO, "esper_warehouse.client"):
            assert read_commands(sim) == expected
        assert other.requests == []  # the key never went there
    finally:
        other.close()
    rewrites = [r for r in caplog.records if "followed on the configured" in r.getMessage()]
    assert len(rewrites) == 1  # once per route, not once per page
    assert link_host in rewrites[0].getMessage() and API_KEY not in caplog.text


def test_a_link_to_a_host_of_another_service_is_refused_before_sending(sim: Any) -> None:
    sim.set_faults(
        [{"kind": "next_foreign_host", "route": COMMANDS, "link_host": "collector.example:443"}]
    )
    sim.reset_stats()
    with pytest.raises(EsperConfigError, match="refusing to follow a link to"):
        read_commands(sim)
    assert sim.stats()["total"] == 1  # the first page only: the link was never requested
