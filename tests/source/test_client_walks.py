"""A run against an API whose lists never end stops with exit 3, naming the list (issue 13).

The simulator answers; a transport between it and the client makes one list ignore where the walk
is (the same first page every time), as a broken API would, while its `next` links or cursors keep
moving on. Before, such a run never ended (365 group-list requests in 20 s for 17 groups).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import run
from esper_warehouse.sources.esper.http import EsperClient

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import settings, with_body


class StuckList(httpx.HTTPTransport):
    """Serves the first page of `path` for every page asked for; links and cursors move on."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith(self.path):
            return super().handle_request(request)
        self.requests += 1
        assert self.requests < 100, "the walk did not stop"
        params = request.url.params
        asked = params.get("offset") or params.get("cursor")
        first = request.url.copy_set_param("offset", "0") if "offset" in params else request.url
        if "cursor" in params:
            first = first.copy_set_param("cursor", "start")
        response = super().handle_request(
            httpx.Request(request.method, first, headers=request.headers)
        )
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body)
        if envelope.get("next"):  # offset + limit, from where the walk asked
            limit = int(params.get("limit", 10))
            offset = int(asked or 0) + limit
            envelope["next"] = str(request.url.copy_set_param("offset", str(offset)))
        if envelope.get("has_more"):  # a new cursor every time
            envelope["next_cursor"] = f"stuck-{self.requests}"
        return with_body(response, body)


@pytest.mark.parametrize(
    ("path", "route", "parallel"),
    [
        (f"/enterprise/{ENTERPRISE_ID}/device/", "/enterprise/", True),  # offset, read in parallel
        ("/v2/devices/", "/v2/devices/", False),  # cursor list
    ],
    ids=["offset-ignored", "cursor-ignored"],
)
def test_a_run_against_a_list_that_never_moves_on_ends_with_exit_3(
    sim: Any, tmp_path: Path, path: str, route: str, parallel: bool
) -> None:
    transport = StuckList(path)
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=transport)
    run_settings = settings(sim, tmp_path / "w.duckdb", source_options={"page_size": 10})
    with client:
        result = run(run_settings, client=client)
    assert result.exit_code == Exit.API, result.error
    assert "keeps sending items it already sent" in result.error
    assert route in result.error
    # a page, two repeats and the page read ahead; a list read in parallel: at most the pages its
    # count plans
    bound = math.ceil(len(sim.truth("devices")) / 10) if parallel else 4
    assert transport.requests <= bound
