"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.pipeline.test_client import LoopbackServer, Reply, Seen


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Seen], Reply]], LoopbackServer]]:
    """Start loopback servers on demand (`test_client.py`'s kit); all are stopped after the test."""
    servers: list[LoopbackServer] = []

    def start(respond: Callable[[Seen], Reply]) -> LoopbackServer:
        servers.append(LoopbackServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
