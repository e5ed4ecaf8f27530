"""What the client sends with: its connection pools and the total deadline of an attempt.

`EsperClient` (`client.py`) decides what to send, when, and what an answer means; this module
carries an attempt to the socket and back within the time it is given:

* `Pools`: several small connection pools, one per group of threads; the headers the client hands
  them (the key among them) live only there.
* `Guard`: the deadline of the attempt in flight on a thread, and the client's stop flag.
* `GuardedTransport`: an httpx transport (httpx's public extension point) over httpcore's
  connection pool, built with httpcore's public `network_backend` parameter: `GuardedBackend`,
  httpcore's own socket backend whose every connect, TLS handshake, read and write
  (`GuardedStream`) is bounded by the `Guard`.

httpx bounds each socket operation, not an attempt as a whole, so a server trickling one byte per
timeout could hold a request for ever (docs/decisions.md, "Bounded requests"); and httpx's own
transport takes no network backend, hence a transport of our own rather than a patch of httpx's
private pool (docs/decisions.md, "The transport and the workers out of the client").
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from .errors import STOP_POLL_S

# Several small connection pools instead of one large one: httpcore scans every connection of its
# pool on each request and release (quadratic in the pool's size), which with 64 connections in
# one pool showed in a full load's CPU (docs/decisions.md, "The client's limiter uses slow start").
# Each thread sticks to one pool (so its connections stay warm); the limiter bounds requests in
# flight across all of them.

_CONNECTIONS_PER_POOL = 8  # connections per httpx pool


class Pools:
    """The connection pools of one client; each thread is given one on its first request.

    Args:
        headers: Sent with every request (the client's `Authorization` among them), kept only
            in the pools (never in a repr, a log record or an exception text).
        timeout: Seconds for each attempt.
        max_concurrency: Connections in all pools together.
        guard: Bounds every socket operation (deadline, stop).
        transport: An httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        headers: Mapping[str, str],
        timeout: float,
        max_concurrency: int,
        guard: Guard,
        transport: httpx.BaseTransport | None,
    ) -> None:
        # one TLS context for every pool: building one loads the CA bundle
        tls = httpx.create_ssl_context()
        limits = httpx.Limits(
            max_connections=max_concurrency,
            max_keepalive_connections=min(max_concurrency, 2 * _CONNECTIONS_PER_POOL),
        )
        self._pools = [
            httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(timeout),
                follow_redirects=False,
                transport=transport or GuardedTransport(guard, tls, limits),
            )
            for _ in range(math.ceil(max_concurrency / _CONNECTIONS_PER_POOL))
        ]
        self._turn = itertools.count()  # which pool the next new thread gets
        self._thread = threading.local()

    def for_thread(self) -> httpx.Client:
        """The connection pool of the calling thread (assigned in turn on its first request)."""
        pool = getattr(self._thread, "http", None)
        if pool is None:
            pool = self._thread.http = self._pools[next(self._turn) % len(self._pools)]
        return pool

    def close(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            pool.close()


# ------------------------------------------------------------------ the deadline of an attempt


class Guard:
    """The total deadline of the calling thread's attempt, and the client's stop flag.

    httpx applies its timeouts to each socket operation: a server that trickles its answer one
    byte at a time never trips a read timeout. Every socket operation of the client goes through
    `GuardedStream`, which asks this guard how long it may block: never past the attempt's
    deadline (connect, TLS, headers and body together), and never more than `STOP_POLL_S` at a
    time for reads, so a stopped client's threads notice within a fraction of a second.
    """

    def __init__(self) -> None:
        # A plain flag, not a threading.Event: setting it takes no lock, so a signal handler can
        # set it whatever the interrupted thread holds. Everything that waits polls it.
        self.stopped = False
        self._local = threading.local()

    def begin(self, seconds: float) -> None:
        """Start the calling thread's attempt: it must be over within `seconds`."""
        self._local.deadline = time.monotonic() + seconds
        self._local.total = seconds

    def end(self) -> None:
        """End the calling thread's attempt (its connections stay open for the next one)."""
        self._local.deadline = None

    def bound(self, until: float | None, timeout_error: type[Exception]) -> float:
        """Seconds an operation may still block: by `until` (monotonic) and by the deadline.

        Raises:
            httpcore.ReadError: The client was stopped.
            timeout_error: One of the two limits has passed.
        """
        if self.stopped:
            raise httpcore.ReadError("the client was stopped")
        deadline = getattr(self._local, "deadline", None)
        limits = [t for t in (until, deadline) if t is not None]
        if not limits:
            return math.inf
        left = min(limits) - time.monotonic()
        if left <= 0:
            if deadline is not None and deadline <= min(limits):
                raise timeout_error(f"no complete answer within {self._local.total:g} s")
            raise timeout_error("timed out")
        return left


class GuardedStream(httpcore.NetworkStream):
    """A socket stream whose every operation is bounded by the `Guard` (see there)."""

    def __init__(self, stream: httpcore.NetworkStream, guard: Guard) -> None:
        self._stream = stream
        self._guard = guard

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = self._guard.bound(until, httpcore.ReadTimeout)
            try:
                # A socket read that times out loses nothing (plain or TLS): try again.
                return self._stream.read(max_bytes, min(left, STOP_POLL_S))
            except httpcore.ReadTimeout:
                continue  # `bound` raises once a limit has passed

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        wait = self._bounded(timeout, httpcore.ConnectTimeout)
        return GuardedStream(
            self._stream.start_tls(ssl_context, server_hostname, wait), self._guard
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)

    def _bounded(self, timeout: float | None, error: type[Exception]) -> float | None:
        until = None if timeout is None else time.monotonic() + timeout
        left = self._guard.bound(until, error)
        return None if left == math.inf else left


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, with every stream it opens wrapped in `GuardedStream`."""

    def __init__(self, guard: Guard) -> None:
        self._inner = httpcore.SyncBackend()
        self._guard = guard

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        until = None if timeout is None else time.monotonic() + timeout
        left = self._guard.bound(until, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(
            host, port, None if left == math.inf else left, local_address, socket_options
        )
        return GuardedStream(stream, self._guard)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:  # pragma: no cover - the client speaks TCP only
        return GuardedStream(
            self._inner.connect_unix_socket(path, timeout, socket_options), self._guard
        )

    def sleep(self, seconds: float) -> None:  # pragma: no cover - unused by HTTP/1.1
        self._inner.sleep(seconds)


# ---------------------------------------------------------------------------- the transport

# What httpcore raises, as the httpx error of the same name that `policy.failed_attempt` reads
# (a timeout, a dropped connection): the table httpx's own transport keeps. httpcore's
# `ConnectionNotAvailable` never leaves its pool (the pool retries on another connection).
HTTPX_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


@contextmanager
def as_httpx_errors() -> Iterator[None]:
    """Raise what httpcore raises as the most specific httpx error of `HTTPX_ERRORS`, chained
    to it (`origin.tls_setting_error` looks down the chain for the TLS or DNS failure)."""
    try:
        yield
    except Exception as error:
        mapped = next((HTTPX_ERRORS[t] for t in type(error).__mro__ if t in HTTPX_ERRORS), None)
        if mapped is None:
            raise
        raise mapped(str(error)) from error


class GuardedTransport(httpx.BaseTransport):
    """httpx's transport to the network, as `httpx.HTTPTransport` is, over an httpcore
    connection pool whose sockets `GuardedBackend` opens (bounded by `guard`).

    Args:
        guard: Bounds every socket operation (deadline, stop).
        tls: The TLS context of every connection.
        limits: Connections in the pool, and how many stay open for the next request.
    """

    def __init__(self, guard: Guard, tls: Any, limits: httpx.Limits) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=tls,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(guard),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with as_httpx_errors():
            answer = self._pool.handle_request(sent)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _Body(httpx.SyncByteStream):
    """An answer's body as httpcore reads it, its errors as httpx's (a read past the deadline
    is a timeout like one before the headers)."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()
