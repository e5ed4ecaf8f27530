"""Page sizes as Esper's own tools read the API (live-observations section 23)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from esper_warehouse.sources.esper.tables import TABLES

from tests.pipeline.helpers import load
from tests.source.test_client import Reply, Seen


def test_blueprints_are_read_20_a_page_and_other_lists_at_most_250(
    sim, serve, tmp_path: Path
) -> None:
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(sim.base_url))
    limits: dict[str, set[int]] = defaultdict(set)
    # one client for every forwarded request: each new one builds a TLS context (~30 ms of CPU)
    upstream = httpx.Client(base_url=origin)

    def forward(seen: Seen) -> Reply:  # a recording proxy in front of the simulator
        url = urlsplit(seen.path)
        for value in parse_qs(url.query).get("limit", []):
            limits[url.path].add(int(value))
        # `Host` as the client sent it, so the simulator's next links point back at the proxy
        headers = {k: seen.headers[k] for k in ("authorization", "host")}
        answer = upstream.get(seen.path, headers=headers)
        return Reply(answer.status_code, answer.json(), {"Date": answer.headers["Date"]})

    proxy = serve(forward)
    base = proxy.url + urlsplit(sim.base_url).path
    with upstream:
        result = load(sim, tmp_path / "w.duckdb", source_options={"base_url": base})
    assert result.exit_code == 0, result.error

    blueprint_path = urlsplit(sim.base_url).path + TABLES["blueprints"].path
    assert limits[blueprint_path] == {20}
    for path, sent in limits.items():
        if path.endswith("/v2/devices/"):
            assert max(sent) <= 1000, path
        else:
            assert max(sent) <= 250, (path, sent)
