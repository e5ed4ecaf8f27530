"""Unit tests of the HTTP client: auth, retries, throttling, concurrency, origin checks, secrecy.

Most tests use `httpx.MockTransport` (no network at all); the ones about keep-alive, gzip, dropped
connections, timeouts and other origins use a real HTTP server on 127.0.0.1, started per test.
Waits between retries go through an injected `sleep` that records them instead of sleeping.
"""

from __future__ import annotations

import gzip
import json
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from esper_warehouse.sources.esper.http import (
    EsperAPIError,
    EsperAuthError,
    EsperClient,
    EsperConfigError,
    EsperError,
    EsperNotFoundError,
    EsperResponseError,
    RouteStats,
)
from esper_warehouse.sources.esper.http.limiter import AdaptiveLimiter

KEY = "sk-live-SECRET-7f3a9c1e2b4d6f80"
EID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
BASE = "https://acme-api.esper.cloud/api"
DEVICE = "0a1b2c3d-1111-4222-8333-444455556666"
HTTP_DATE = "Thu, 01 Oct 2026 00:00:00 GMT"


# ------------------------------------------------------------------------- mock transport kit


class Script:
    """An httpx.MockTransport handler that answers from a list, the last answer repeating.

    Each answer is an `httpx.Response`, an exception to raise (timeouts, dropped connections),
    or a callable taking the request.
    """

    def __init__(self, *answers: httpx.Response | Exception | Callable[..., Any]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


def ok(body: Any = None, **headers: str) -> httpx.Response:
    return httpx.Response(200, json={"ok": True} if body is None else body, headers=headers)


def status(code: int, body: Any = None, **headers: str) -> httpx.Response:
    if body is None:
        return httpx.Response(code, headers=headers)
    return httpx.Response(code, json=body, headers=headers)


def mock_client(script: Script, **kwargs: Any) -> tuple[EsperClient, list[float]]:
    """A client on `BASE` answered by `script`; returns it with the list of its waits."""
    sleeps: list[float] = []
    options: dict[str, Any] = {"sleep": sleeps.append, "rng": random.Random(7)}
    options.update(kwargs)
    client = EsperClient(BASE, KEY, EID, transport=httpx.MockTransport(script), **options)
    return client, sleeps


# ------------------------------------------------------------------------- loopback server kit


@dataclass
class Reply:
    """What the loopback server does for one request."""

    status: int = 200
    body: Any = field(default_factory=lambda: {"ok": True})
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without answering
    delay: float = 0.0  # seconds before answering
    gzip: bool = False  # gzip the body when the client accepts it
    raw: bytes | None = None  # sent as is instead of `body` as JSON (a body that is not JSON)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    client_port: int


class _Listening(ThreadingHTTPServer):
    # socketserver's backlog is 5: on a busy machine its accept loop lags, a sixth connection
    # opened at once is dropped and the client sends it again a second later
    request_queue_size = 128


class LoopbackServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 that answers from a function of the request."""

    def __init__(self, respond: Callable[[Seen], Reply]) -> None:
        self.requests: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive
            # TCP_NODELAY: the headers and the body are two writes; with Nagle's algorithm and the
            # client's delayed ACK, every answer on a kept-alive connection waited ~40 ms.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                seen = Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.client_address[1],
                )
                server.requests.append(seen)
                reply = respond(seen)
                if reply.drop:
                    self.close_connection = True
                    return
                time.sleep(reply.delay)
                payload = json.dumps(reply.body).encode() if reply.raw is None else reply.raw
                headers = {"Content-Type": "application/json", **reply.headers}
                if reply.gzip and "gzip" in seen.headers.get("accept-encoding", ""):
                    payload = gzip.compress(payload)
                    headers["Content-Encoding"] = "gzip"
                headers.setdefault("Date", self.date_time_string())
                try:
                    self.send_response_only(reply.status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout test)
                    self.close_connection = True

        self._httpd = _Listening(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def sequence(*replies: Reply) -> Callable[[Seen], Reply]:
    """Answer with `replies` in order, the last one repeating."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(seen: Seen) -> Reply:
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def loopback_client(server: LoopbackServer, **kwargs: Any) -> EsperClient:
    options: dict[str, Any] = {"sleep": lambda s: None, "timeout": 5.0}
    options.update(kwargs)
    return EsperClient(server.url + "/api", KEY, EID, **options)


# ------------------------------------------------------------------------------ construction


def test_base_url_normalised_and_loopback_http_allowed() -> None:
    assert EsperClient(BASE + "/", KEY).base_url == BASE
    assert EsperClient("HTTPS://ACME-API.esper.cloud/api", KEY).base_url == BASE
    for url in (
        "http://127.0.0.1:8000/api",
        "http://127.9.9.9/api",
        "http://localhost:8000/api",
        "http://[::1]:8000/api",
    ):
        assert EsperClient(url, KEY).base_url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://acme-api.esper.cloud/api",
        "http://10.0.0.5/api",
        "http://localhost.evil.example/api",
        "ftp://acme-api.esper.cloud/api",
        "acme-api.esper.cloud/api",
        "https://user:pw@acme-api.esper.cloud/api",
        "https://acme-api.esper.cloud/api?x=1",
        "",
    ],
)
def test_bad_base_url_refused(url: str) -> None:
    with pytest.raises(EsperConfigError):
        EsperClient(url, KEY)


def test_missing_or_unusable_key_refused_without_echoing_it() -> None:
    with pytest.raises(EsperConfigError, match="no API key"):
        EsperClient(BASE, "  ")
    with pytest.raises(EsperConfigError) as caught:
        EsperClient(BASE, "abc SECRETPART\n")
    assert "SECRETPART" not in str(caught.value)


def test_bad_concurrency_bounds_refused() -> None:
    with pytest.raises(EsperConfigError):
        EsperClient(BASE, KEY, min_concurrency=10, max_concurrency=5)


# ----------------------------------------------------------------------------------- headers


def test_bearer_and_accept_headers_sent_and_removed_headers_not() -> None:
    script = Script(ok({"content": {"results": []}}))
    client, _ = mock_client(script)
    assert client.get("/v2/devices/", {"limit": 5}) == {"content": {"results": []}}
    request = script.requests[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "application/json"
    assert request.headers["accept-encoding"] == "gzip"
    for removed in ("x-caller-id", "x-scapi-private-url", "x-tenant-id"):
        assert removed not in request.headers
    assert str(request.url) == f"{BASE}/v2/devices/?limit=5"


def test_key_sent_over_loopback_and_keep_alive_reuses_one_connection(serve: Any) -> None:
    server = serve(sequence(Reply(headers={"Date": HTTP_DATE})))
    with loopback_client(server) as client:
        for _ in range(5):
            client.get("/v2/devices/")
    assert all(seen.headers["authorization"] == f"Bearer {KEY}" for seen in server.requests)
    assert len({seen.client_port for seen in server.requests}) == 1  # one kept-alive connection
    assert client.server_time == datetime(2026, 10, 1, tzinfo=UTC)


def test_gzip_body_decoded_and_wire_bytes_counted(serve: Any) -> None:
    body = {"results": [{"id": i, "name": "device " * 20} for i in range(200)]}
    server = serve(sequence(Reply(body=body, gzip=True)))
    with loopback_client(server) as client:
        assert client.get("/v2/devices/") == body
        wire = client.totals().bytes
    assert server.requests[0].headers["accept-encoding"] == "gzip"
    assert 0 < wire < len(json.dumps(body)) / 5  # compressed on the wire


def test_post_sends_json() -> None:
    script = Script(httpx.Response(201, json={"content": {"id": "q1"}}))
    client, _ = mock_client(script)
    assert client.post("/data-tap/v0/queries", {"query": "select 1"}) == {"content": {"id": "q1"}}
    request = script.requests[0]
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {"query": "select 1"}


def test_server_time_from_date_header() -> None:
    client, _ = mock_client(Script(ok(Date="Mon, 05 Oct 2026 13:14:15 GMT")))
    assert client.server_time is None
    client.get("/v2/devices/")
    assert client.server_time == datetime(2026, 10, 5, 13, 14, 15, tzinfo=UTC)


# ------------------------------------------------------------------------------------ 429s


def test_429_retry_after_seconds_honoured() -> None:
    script = Script(status(429, **{"Retry-After": "3"}), ok())
    client, sleeps = mock_client(script)
    assert client.get("/v2/devices/") == {"ok": True}
    assert sleeps == [pytest.approx(3, abs=0.05)]
    assert len(script.requests) == 2
    stats = client.stats()["GET /v2/devices/"]
    assert (stats.requests, stats.retries, stats.throttled, stats.errors) == (2, 1, 1, 0)


def test_429_retry_after_http_date_read_against_the_servers_date_header() -> None:
    # The server's clock is in 2026, the local clock is not: only the Date header makes 7 s.
    throttled = status(429, **{"Date": HTTP_DATE, "Retry-After": "Thu, 01 Oct 2026 00:00:07 GMT"})
    client, sleeps = mock_client(Script(throttled, ok()))
    client.get("/v2/devices/")
    assert sleeps == [pytest.approx(7, abs=0.05)]


def test_429_without_retry_after_backs_off_with_jitter_and_lowers_concurrency() -> None:
    script = Script(status(429), status(429), status(429), ok())
    client, sleeps = mock_client(script, initial_concurrency=20, min_concurrency=2)
    assert client.concurrency == 20
    client.get("/v2/devices/")
    assert client.concurrency == 2  # 20 -> 10 -> 5 -> 2 (never below the minimum)
    assert len(sleeps) == 3
    for retry, wait in enumerate(sleeps, start=1):
        assert 0 <= wait <= 0.5 * 2 ** (retry - 1)  # full jitter under a doubling cap
    assert len(set(sleeps)) == 3
    assert client.stats()["GET /v2/devices/"].throttled == 3


def test_429_burst_from_requests_in_flight_together_halves_once() -> None:
    gate = threading.Barrier(4, timeout=5)
    answered = []
    lock = threading.Lock()

    def throttle_the_first_four(request: httpx.Request) -> httpx.Response:
        with lock:
            answered.append(request)
            first_four = len(answered) <= 4
        if first_four:
            gate.wait()  # all four are in flight before any of them is answered
            return status(429, **{"Retry-After": "0"})
        return ok()

    client, _ = mock_client(Script(throttle_the_first_four), initial_concurrency=16)
    list(client.map(lambda i: client.get("/v2/devices/", {"i": i}), range(4)))
    assert len(answered) == 8  # each retried once
    assert client.concurrency == 8  # halved once, not 16 / 2**4


def test_concurrency_climbs_back_while_healthy() -> None:
    script = Script(status(429), ok())
    client, _ = mock_client(script, initial_concurrency=4, min_concurrency=2, max_concurrency=6)
    client.get("/v2/devices/")
    assert client.concurrency == 2
    seen = []
    for _ in range(25):
        client.get("/v2/devices/")
        seen.append(client.concurrency)
    assert seen == sorted(seen)  # additive increase only
    assert seen[-1] == 6  # back up to the maximum, and not beyond
    assert seen[:3] == [3, 3, 3]  # +1 after a window of `limit` healthy answers


def test_slow_start_doubles_per_healthy_window_until_the_first_429() -> None:
    script = Script(ok())
    client, _ = mock_client(script, initial_concurrency=4, max_concurrency=64)
    seen = []
    for _ in range(4 + 8 + 16):
        client.get("/v2/devices/")
        seen.append(client.concurrency)
    assert seen[3] == 8 and seen[11] == 16 and seen[-1] == 32  # x2 per window of `limit`
    script.answers = [status(429), ok()]
    client.get("/v2/devices/")  # halved once, then additive only
    assert client.concurrency == 16
    for _ in range(16):
        client.get("/v2/devices/")
    assert client.concurrency == 17


def test_bulk_requests_yield_free_slots_to_direct_ones() -> None:
    limiter = AdaptiveLimiter(initial=1, minimum=1, maximum=1)
    order: list[str] = []
    epoch = limiter.acquire()  # the only slot is taken

    def take(name: str, urgent: bool) -> None:
        limiter.release(limiter.acquire(urgent=urgent), "neutral")
        order.append(name)

    bulk = threading.Thread(target=take, args=("bulk", False))
    bulk.start()
    time.sleep(0.05)  # the bulk request waits first
    direct = threading.Thread(target=take, args=("direct", True))
    direct.start()
    time.sleep(0.05)
    limiter.release(epoch, "neutral")
    bulk.join(5)
    direct.join(5)
    assert order == ["direct", "bulk"]


def test_requests_in_flight_never_exceed_the_adaptive_limit() -> None:
    in_flight = 0
    peak = 0
    violations = []
    lock = threading.Lock()
    client: EsperClient

    def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            if in_flight > client.concurrency:
                violations.append((in_flight, client.concurrency))
        time.sleep(0.01)
        with lock:
            in_flight -= 1
        return ok()

    client, _ = mock_client(Script(slow), initial_concurrency=3, max_concurrency=8)
    results = list(client.map(lambda i: client.get("/v2/devices/", {"i": i}), range(60)))
    assert len(results) == 60
    assert violations == []
    assert peak >= 3
    assert client.concurrency > 3  # climbed while healthy


# ---------------------------------------------------------------------------- 5xx, transport


def test_5xx_burst_then_success() -> None:
    script = Script(status(500), status(502), status(503), status(504), ok())
    client, sleeps = mock_client(script)
    assert client.get("/v2/devices/") == {"ok": True}
    assert len(script.requests) == 5
    assert len(sleeps) == 4
    stats = client.stats()["GET /v2/devices/"]
    assert (stats.requests, stats.retries, stats.errors, stats.throttled) == (5, 4, 4, 0)
    assert client.concurrency == 20  # 5xx neither raises nor lowers the limit by itself


def test_retries_exhausted_raise_api_error_naming_the_route() -> None:
    body = {"code": 503, "message": "down for maintenance", "content": {}}
    script = Script(status(503, body))
    client, sleeps = mock_client(script, max_retries=2)
    with pytest.raises(EsperAPIError) as caught:
        client.get(f"/v2/devices/{DEVICE}/device-apps/")
    error = caught.value
    assert error.status == 503
    assert error.route == "GET /v2/devices/{id}/device-apps/"
    assert "GET /v2/devices/{id}/device-apps/" in str(error)
    assert "3 attempts" in str(error) and "down for maintenance" in str(error)
    assert len(script.requests) == 3
    assert len(sleeps) == 2


def test_a_429_storm_costs_no_retry_but_ends_when_the_wait_budget_is_spent() -> None:
    """Losing the race for a rate limit's window is not a failure (a 25 req/s tenant exhausted
    eight retries with 20 requests in flight): 429s do not count against `max_retries`, but
    their waits add up to `max_retry_wait`, then the request fails."""
    client, sleeps = mock_client(
        Script(status(429, **{"Retry-After": "1"})), max_retries=3, max_retry_wait=10
    )
    with pytest.raises(EsperAPIError) as caught:
        client.get("/v2/devices/")
    assert caught.value.status == 429
    assert client.stats()["GET /v2/devices/"].throttled > 4  # more than max_retries + 1
    assert sum(sleeps) <= 10


def test_429s_without_a_wait_end_after_a_bounded_number() -> None:
    client, _ = mock_client(Script(status(429, **{"Retry-After": "0"})), max_retries=3)
    with pytest.raises(EsperAPIError):
        client.get("/v2/devices/")
    assert client.stats()["GET /v2/devices/"].throttled == 100 + 3 + 1  # free 429s, then retries


def test_a_retry_after_429s_is_numbered_against_the_retry_budget_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """429s cost no retry, so the log does not count them as retries: a 503 after eleven 429s is
    `retry 1/8`, not `retry 12/8` (which reads as a budget overrun that did not happen)."""
    answers = [status(429, **{"Retry-After": "1"})] * 11 + [status(503), status(503), ok()]
    client, _ = mock_client(Script(*answers))
    with caplog.at_level(logging.DEBUG, "esper_warehouse.client"):
        assert client.get("/v2/devices/") == {"ok": True}
    told = [r.getMessage() for r in caplog.records if "HTTP 503" in r.getMessage()]
    assert ["retry 1/8" in m for m in told] == [True, False]
    assert ["retry 2/8" in m for m in told] == [False, True]
    refused = [r.getMessage() for r in caplog.records if "HTTP 429" in r.getMessage()]
    assert [m for m in refused if "429 number 11" in m] and not [m for m in refused if "/8" in m]


def test_a_throttled_request_is_served_once_the_window_opens() -> None:
    answers = [status(429, **{"Retry-After": "1"})] * 12 + [ok()]
    client, _ = mock_client(Script(*answers), max_retries=3)
    assert client.get("/v2/devices/") == {"ok": True}


def test_timeouts_and_dropped_connections_retried() -> None:
    request = httpx.Request("GET", BASE)
    script = Script(
        httpx.ReadTimeout("timed out", request=request),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ConnectError("connection refused", request=request),
        ok(),
    )
    client, sleeps = mock_client(script)
    assert client.get("/v2/devices/") == {"ok": True}
    assert len(sleeps) == 3
    stats = client.stats()["GET /v2/devices/"]
    assert (stats.requests, stats.retries, stats.errors) == (4, 3, 3)


def test_timeouts_exhausted_raise_api_error_without_status() -> None:
    request = httpx.Request("GET", BASE)
    client, _ = mock_client(
        Script(httpx.ConnectTimeout("timed out", request=request)), max_retries=1
    )
    with pytest.raises(EsperAPIError, match="timeout") as caught:
        client.get("/v2/groups/")
    assert caught.value.status is None


def test_dropped_connection_on_a_real_socket_retried(serve: Any) -> None:
    server = serve(sequence(Reply(drop=True), Reply(body={"results": [1]})))
    with loopback_client(server) as client:
        assert client.get("/v2/devices/") == {"results": [1]}
        assert client.totals().retries == 1
    assert len(server.requests) == 2


def test_slow_answer_times_out_and_is_retried(serve: Any) -> None:
    server = serve(sequence(Reply(delay=1.0), Reply(body={"results": [2]})))
    with loopback_client(server, timeout=0.25) as client:
        assert client.get("/v2/devices/") == {"results": [2]}
    assert len(server.requests) == 2


def test_malformed_json_retried_then_succeeds() -> None:
    script = Script(httpx.Response(200, content=b'{"content": {"results": [{"id'), ok())
    client, sleeps = mock_client(script)
    assert client.get("/v2/devices/") == {"ok": True}
    assert len(sleeps) == 1


def test_malformed_json_exhausted_raises_response_error() -> None:
    script = Script(httpx.Response(200, content=b'{"count": 3, "results": [{"id'))
    client, _ = mock_client(script, max_retries=2)
    with pytest.raises(EsperResponseError, match="not valid JSON") as caught:
        client.get("/v2/devices/")
    assert caught.value.route == "GET /v2/devices/"
    assert len(script.requests) == 3


# --------------------------------------------------------------------------- errors at once


@pytest.mark.parametrize("code", [401, 403])
def test_refused_key_fails_at_once(code: int) -> None:
    body = {"errors": ["Invalid token."], "message": "Invalid token.", "status": code}
    script = Script(status(code, body))
    client, sleeps = mock_client(script)
    with pytest.raises(EsperAuthError) as caught:
        client.get("/v2/devices/")
    assert str(caught.value).startswith(
        f"the API key was refused (HTTP {code}) by https://acme-api.esper.cloud"
    )
    assert caught.value.status == code
    assert len(script.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "path", [f"/enterprise/{EID}/devicegroup/", "/v2/devices/", f"/v0/enterprise/{EID}/device/"]
)
def test_404_on_a_tenant_level_path_names_enterprise_id_and_base_url(path: str) -> None:
    script = Script(status(404, {"errors": [], "message": "Not found.", "status": 404}))
    client, _ = mock_client(script)
    with pytest.raises(EsperNotFoundError) as caught:
        client.get(path)
    text = str(caught.value)
    assert EID in text and BASE in text and "probably wrong" in text
    assert caught.value.tenant_level
    assert len(script.requests) == 1


def test_404_on_a_record_path_says_the_record_may_be_gone() -> None:
    client, _ = mock_client(Script(status(404)))
    with pytest.raises(EsperNotFoundError) as caught:
        client.get(f"/enterprise/{EID}/device/{DEVICE}/app/")
    assert not caught.value.tenant_level
    assert "may have been removed" in str(caught.value)
    assert caught.value.route == "GET /enterprise/{id}/device/{id}/app/"


@pytest.mark.parametrize(
    "body",
    [
        {"errors": ["limit must be an integer"], "message": "Bad Request", "status": 400},
        {"code": 400, "message": "limit must be an integer", "content": {}},
        {"status": "400", "error": "Bad Request", "message": "limit must be an integer"},
    ],
    ids=["legacy", "v0-v2", "reports"],
)
def test_other_4xx_fails_at_once_with_the_api_message(body: dict[str, Any]) -> None:
    script = Script(status(400, body))
    client, sleeps = mock_client(script)
    with pytest.raises(EsperAPIError, match="limit must be an integer") as caught:
        client.get("/v2/devices/", {"limit": "x"})
    assert caught.value.status == 400
    assert caught.value.route == "GET /v2/devices/"
    assert len(script.requests) == 1 and sleeps == []


def test_redirect_not_followed() -> None:
    script = Script(status(302, Location="https://elsewhere.example/api/v2/devices/"))
    client, _ = mock_client(script)
    with pytest.raises(EsperAPIError, match=r"redirect.*https://elsewhere\.example"):
        client.get("/v2/devices/")
    assert len(script.requests) == 1


# ---------------------------------------------------------------------------- origin checks


@pytest.mark.parametrize(
    "link",
    [
        "https://evil.example.com/api/v2/devices/?offset=20",
        "https://acme-api.esper.cloud.evil.example/api/v2/devices/",
        "https://esper.cloud.evil.example/api/v2/devices/",
        "https://user@acme-api.esper.cloud/api/v2/devices/",
        "//evil.example.com/api/v2/devices/",
        "https://acme-api.esper.cloud/other/v2/devices/",
        "https://acme-api.esper.cloud/apiary/v2/devices/",
        "https://acme-api.esper.cloud/api/../admin/",
        "https://acme-api.esper.cloud/api/v2/%2e%2e/%2e%2e/admin/",
        "/../admin/",
    ],
)
def test_links_off_the_base_url_refused_before_sending(link: str) -> None:
    script = Script(ok())
    client, _ = mock_client(script)
    with pytest.raises(EsperConfigError):
        client.get(link)
    assert script.requests == []


def test_same_origin_absolute_link_followed() -> None:
    script = Script(ok())
    client, _ = mock_client(script)
    client.get("https://ACME-API.esper.cloud:443/api/v2/devices/?limit=20&offset=20")
    assert script.requests[0].url.params["offset"] == "20"
    assert "GET /v2/devices/" in client.stats()


@pytest.mark.parametrize(
    "link",
    [
        "http://acme-api.esper.cloud/api/v2/devices/?limit=20&offset=20",  # http:// (live §12)
        "https://acme-api.esper.cloud:8443/api/v2/devices/?limit=20&offset=20",
        "https://develop-api.esper.cloud/api/v2/devices/?limit=20&offset=20",  # another host
        "http://other-tenant-api.esper.cloud/api/v2/devices/?limit=20&offset=20",
    ],
)
def test_links_of_the_same_service_are_followed_on_the_configured_origin(
    link: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Esper's own tool rewrites such `next` links onto the configured host (live §12)."""
    script = Script(ok())
    client, _ = mock_client(script)
    with caplog.at_level(logging.INFO, logger="esper_warehouse.client"):
        client.get(link)
    sent = script.requests[0].url
    assert (sent.scheme, sent.host, sent.port) == ("https", "acme-api.esper.cloud", None)
    assert sent.path == "/api/v2/devices/" and sent.params["offset"] == "20"
    assert "followed on the configured https://acme-api.esper.cloud" in caplog.text


def test_next_link_to_another_loopback_server_never_reaches_it(serve: Any) -> None:
    """Two loopback servers are one service here: the link is followed on ours, never theirs."""
    ours = serve(sequence(Reply(), Reply()))
    other = serve(sequence(Reply()))
    with loopback_client(ours) as client:
        client.get(other.url + "/api/v2/devices/?offset=20&limit=20")
        client.get(ours.url + "/api/v2/devices/?offset=20&limit=20")
    assert other.requests == []
    assert len(ours.requests) == 2


# ------------------------------------------------------------------------------------- map


def test_map_yields_every_result() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return ok({"i": int(request.url.params["i"])})

    client, _ = mock_client(Script(echo), max_concurrency=4)
    results = list(client.map(lambda i: client.get("/v2/devices/", {"i": i})["i"], range(50)))
    assert sorted(results) == list(range(50))


def test_map_reads_items_lazily_and_propagates_the_first_exception() -> None:
    started = []
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            started.append(item)
        if item == 3:
            raise ValueError("item 3 is bad")
        time.sleep(0.002)
        return item

    client, _ = mock_client(Script(ok()), max_concurrency=4)
    with pytest.raises(ValueError, match="item 3 is bad"):
        list(client.map(work, range(10_000)))
    assert len(started) < 100  # what had not started was cancelled, the rest never read


def test_map_propagates_client_errors() -> None:
    client, _ = mock_client(Script(status(401)), max_concurrency=4)
    with pytest.raises(EsperAuthError):
        list(client.map(lambda i: client.get(f"/v2/devices/{i}/"), range(20)))


def test_read_ahead_keeps_order_reads_one_ahead_and_stops_when_closed() -> None:
    produced: list[int] = []

    def pages() -> Iterator[int]:
        for i in range(100):
            produced.append(i)
            yield i

    client, _ = mock_client(Script(ok()))
    walk = client.read_ahead(pages())
    assert [next(walk) for _ in range(3)] == [0, 1, 2]
    deadline = time.monotonic() + 5  # a busy machine may take a while to run the reading thread
    while len(produced) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # room for a wrong second read ahead
    assert produced == [0, 1, 2, 3]  # the next item is ready, nothing beyond it
    walk.close()
    assert produced == [0, 1, 2, 3]
    assert list(client.read_ahead(pages())) == list(range(100))


def test_read_ahead_raises_the_walk_s_error_in_the_caller() -> None:
    def pages() -> Iterator[int]:
        yield 1
        raise EsperAuthError("the API key was refused")

    client, _ = mock_client(Script(ok()))
    with pytest.raises(EsperAuthError, match="refused"):
        list(client.read_ahead(pages()))


# ----------------------------------------------------------------------------------- stats


def test_stats_keyed_by_route_template() -> None:
    client, _ = mock_client(Script(ok({"results": ["x" * 100]})))
    client.get(f"/v2/devices/{DEVICE}/device-apps/")
    client.get("/v2/devices/0a1b2c3d111142228333444455556666/device-apps/")
    client.get(f"/enterprise/{EID}/device/{DEVICE}/app/")
    client.get(f"/enterprise/{EID}/application/123/version/")
    client.get("/v2/devices/", {"cursor": "start"})
    stats = client.stats()
    assert set(stats) == {
        "GET /v2/devices/{id}/device-apps/",
        "GET /enterprise/{id}/device/{id}/app/",
        "GET /enterprise/{id}/application/{id}/version/",
        "GET /v2/devices/",
    }
    assert stats["GET /v2/devices/{id}/device-apps/"].requests == 2
    totals = client.totals()
    assert isinstance(totals, RouteStats)
    assert totals.requests == 5 and totals.bytes > 500 and totals.seconds >= 0


# ---------------------------------------------------------------------------------- secrecy


def test_api_key_never_in_logs_exceptions_tracebacks_or_reprs(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "esper_warehouse"):
        caplog.set_level(logging.DEBUG, logger=name)

    def respond(seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        answers = {
            "/api/ok/": Reply(),
            "/api/throttled/": Reply(status=429, headers={"Retry-After": "0"}),
            "/api/down/": Reply(status=503, body={"code": 503, "message": "down", "content": {}}),
            "/api/dropped/": Reply(drop=True),
            "/api/refused/": Reply(status=401, body={"errors": ["bad"], "message": "bad"}),
            "/api/missing/": Reply(status=404),
            "/api/bad/": Reply(status=400, body={"code": 400, "message": "bad", "content": {}}),
        }
        return answers.get(path, Reply(status=500))

    server = serve(respond)
    client = loopback_client(server, max_retries=1)
    errors: list[BaseException] = []
    client.get("/ok/")
    for path in ("/throttled/", "/down/", "/dropped/", "/refused/", "/missing/", "/bad/"):
        with pytest.raises(EsperError) as caught:
            client.get(path)
        errors.append(caught.value)
    with pytest.raises(EsperConfigError) as caught:
        client.get("https://evil.example.com/api/ok/")
    errors.append(caught.value)
    for bad_key in (f"{KEY} extra", f"{KEY}\n{KEY}"):
        with pytest.raises(EsperConfigError) as caught:
            EsperClient(server.url, bad_key)
        errors.append(caught.value)
    with pytest.raises(EsperConfigError) as caught:
        EsperClient("http://example.com/api", KEY)
    errors.append(caught.value)

    assert {type(e) for e in errors} >= {EsperAPIError, EsperAuthError, EsperNotFoundError}
    assert any(r.name.startswith("httpcore") for r in caplog.records)  # debug logs were on
    assert any(r.levelno == logging.WARNING for r in caplog.records)  # retries were logged
    assert KEY not in caplog.text
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in repr(record.args)
    for error in errors:
        assert KEY not in str(error) and KEY not in repr(error)
        assert KEY not in "".join(traceback.format_exception(error))
    assert KEY not in repr(client) and KEY not in str(client)
    assert KEY not in repr(vars(client))
    client.close()


def test_paths_without_a_leading_slash_and_plain_enterprise_ids() -> None:
    script = Script(ok())
    client = EsperClient(BASE, KEY, "acme", transport=httpx.MockTransport(script))
    client.get("v2/devices/")
    client.get("/enterprise/acme/devicegroup/")
    assert str(script.requests[0].url) == f"{BASE}/v2/devices/"
    assert set(client.stats()) == {"GET /v2/devices/", "GET /enterprise/{id}/devicegroup/"}
    with pytest.raises(EsperConfigError):
        client.get("mailto:someone@example.com")
