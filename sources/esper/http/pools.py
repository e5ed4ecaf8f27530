"""The client's connections: a few small httpx pools, one per thread; the key lives only here.

Several small connection pools instead of one large one: httpcore scans every connection of its
pool on each request and release (quadratic in the pool's size), which with 64 connections in one
pool cost about a fifth of a full load's CPU. Each thread sticks to one pool (so its connections
stay warm); the limiter bounds requests in flight across all of them.
"""

from __future__ import annotations

import itertools
import math
import threading

import httpx

from .deadline import Guard, guarded_transport

_CONNECTIONS_PER_POOL = 8  # connections per httpx pool


class Pools:
    """The connection pools of one client; each thread is given one on its first request.

    Args:
        key: The API key, sent as ``Authorization: Bearer <key>`` and kept only in the pools'
            headers (never in a repr, a log record or an exception text).
        timeout: Seconds for each attempt.
        max_concurrency: Connections in all pools together.
        guard: Bounds every socket operation (deadline, stop).
        transport: An httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        key: str,
        timeout: float,
        max_concurrency: int,
        guard: Guard,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self._pools = _connection_pools(key, timeout, max_concurrency, guard, transport)
        self._turn = itertools.count()  # which pool the next new thread gets
        self._thread = threading.local()

    def for_thread(self) -> httpx.Client:
        """The connection pool of the calling thread (assigned in turn on its first request)."""
        pool = getattr(self._thread, "http", None)
        if pool is None:
            pool = self._thread.http = self._pools[next(self._turn) % len(self._pools)]
        return pool

    def key(self) -> str:
        """The key, for redaction only (the headers are the same in every pool)."""
        return self._pools[0].headers.get("authorization", "").removeprefix("Bearer ")

    def close(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            pool.close()


def _connection_pools(
    key: str,
    timeout: float,
    max_concurrency: int,
    guard: Guard,
    transport: httpx.BaseTransport | None,
) -> list[httpx.Client]:
    """One httpx client per pool, all with the same headers and limits."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "Accept-Encoding": "gzip",
        "User-Agent": "esper-warehouse (httpx)",
    }
    pools = math.ceil(max_concurrency / _CONNECTIONS_PER_POOL)
    # one TLS context for every pool: building one loads the CA bundle (~20 ms each)
    tls = httpx.create_ssl_context()
    limits = httpx.Limits(
        max_connections=max_concurrency,
        max_keepalive_connections=min(max_concurrency, 2 * _CONNECTIONS_PER_POOL),
    )
    return [
        httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            transport=transport or guarded_transport(guard, tls, limits),
        )
        for _ in range(pools)
    ]
