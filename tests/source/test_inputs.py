"""What the client is given is checked before anything is sent: the enterprise id (stripped, one
path segment), dot segments in a route (before httpx collapses them), and a base URL whose
`https://` meets a plain-HTTP port (a setting error at the first attempt, never retried)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from esper_warehouse.sources.esper.http import EsperClient, EsperConfigError

from .test_client import BASE, EID, KEY, Script, mock_client, ok


@pytest.mark.parametrize(
    "path",
    [
        "/enterprise/../v2/devices/",
        "/v2/devices/../../v2/tenant-apps",
        f"{BASE}/enterprise/../v2/devices/",
        "/v2/./devices/",
        "/enterprise/%2e%2E/v2/devices/",
        "v2/devices/../devices/",
    ],
)
def test_dot_segments_under_the_base_path_are_refused_before_sending(path: str) -> None:
    script = Script(ok())
    client, _ = mock_client(script)
    with pytest.raises(EsperConfigError, match="dot segments"):
        client.get(path)
    assert script.requests == []


def test_a_dotted_query_value_is_no_dot_segment() -> None:
    script = Script(ok())
    client, _ = mock_client(script)
    client.get("/v2/devices/?search=../x")
    assert len(script.requests) == 1


@pytest.mark.parametrize("eid", ["", "   ", "\t\n"])
def test_an_empty_enterprise_id_is_named_as_missing(eid: str) -> None:
    with pytest.raises(EsperConfigError, match="no enterprise id: set SOURCES__ESPER__ENTERPRISE"):
        EsperClient(BASE, KEY, eid)


@pytest.mark.parametrize("eid", ["../v2", "a/b", "5f1c 2d3e", "a?b", ".", "é"])
def test_an_enterprise_id_that_is_not_one_segment_is_refused(eid: str) -> None:
    with pytest.raises(EsperConfigError, match="is not one: expected letters, digits"):
        EsperClient(BASE, KEY, eid)


def test_spaces_around_the_enterprise_id_are_stripped_as_the_key_s_are() -> None:
    script = Script(ok())
    client, _ = mock_client(script)  # the client the other tests use, with EID
    padded = EsperClient(BASE, f" {KEY}\n", f"  {EID}\n", transport=httpx.MockTransport(script))
    assert padded.enterprise_id == EID == client.enterprise_id
    padded.get(f"/enterprise/{padded.enterprise_id}/devicegroup/")
    assert script.requests[0].url.path == f"/api/enterprise/{EID}/devicegroup/"


@pytest.fixture
def plain_port() -> Iterator[tuple[int, list[int]]]:
    """A loopback port that answers every connection in plain HTTP; counts the connections."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


def test_https_to_a_plain_http_port_fails_at_the_first_attempt(plain_port) -> None:
    port, accepted = plain_port
    client = EsperClient(f"https://127.0.0.1:{port}/api", KEY, EID, backoff_base=0.01)
    started = time.monotonic()
    with pytest.raises(EsperConfigError) as refused:
        client.get("/v2/devices/")
    client.close()
    text = str(refused.value)
    assert f"the TLS handshake with https://127.0.0.1:{port} failed (WRONG_VERSION_NUMBER)" in text
    assert "does not speak TLS" in text and "SOURCES__ESPER__BASE_URL" in text
    assert len(accepted) == 1, f"{len(accepted)} connections: a setting error is not retried"
    assert time.monotonic() - started < 5
    assert KEY not in text
