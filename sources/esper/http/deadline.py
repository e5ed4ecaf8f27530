"""Nothing hangs: every attempt ends within its timeout in total, and `stop()` ends it at once.

httpx bounds each socket operation, not an attempt as a whole: a server trickling one byte per
timeout could hold a request for ever. `Guard` holds the deadline of the attempt in flight on a
thread and the client's stop flag; the guarded network backend bounds every connect, read and
write by both. `wait_interruptibly` keeps a main thread responsive to Ctrl-C while it waits.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import httpcore
import httpx

T = TypeVar("T")

# A blocked socket read wakes this often to notice `EsperClient.stop()` (see `GuardedStream`).
STOP_POLL_S = 0.25


def wait_interruptibly(wait: Callable[..., T], timed_out: type[Exception]) -> T:
    """Call `wait(timeout=...)` in slices of `STOP_POLL_S` until it returns a value.

    The kernel may deliver Ctrl-C or SIGTERM to any thread of the process, and Python runs
    signal handlers on the main thread only, between two steps of Python code. A main thread
    asleep in an untimed wait (a queue, a future) would notice the signal only when the wait
    ended, possibly minutes later; waking it every slice lets the handler run at once.

    Args:
        wait: A blocking call that takes ``timeout`` and raises `timed_out` when it expires.
        timed_out: The exception `wait` raises on a timeout.
    """
    while True:
        try:
            return wait(timeout=STOP_POLL_S)
        except timed_out:
            continue


class Guard:
    """The total deadline of the calling thread's attempt, and the client's stop flag.

    httpx applies its timeouts to each socket operation: a server that trickles its answer one
    byte at a time never trips a read timeout, so a 470-byte answer at one byte every 2 s took
    ~940 s under a 60 s `request_timeout`. Every socket operation of the client goes through
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


def guarded_transport(guard: Guard, tls: Any, limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's transport, its socket operations bounded by `guard`.

    httpx does not take a network backend; its connection pool (`httpcore.ConnectionPool`) does,
    so the backend is set on the pool it built. Checked here, so that an httpx upgrade that moves
    it fails at construction (and in the tests), not silently.
    """
    transport = httpx.HTTPTransport(verify=tls, limits=limits)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpx/httpcore changed: cannot bound requests by a total deadline")
    pool._network_backend = GuardedBackend(guard)
    return transport
