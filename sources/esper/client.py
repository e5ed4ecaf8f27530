"""The one HTTP client of the Esper source: auth, retries, rate limits, concurrency, origin checks.

Everything that talks to the Esper API goes through `EsperClient`. It owns the HTTP policy so that
resources never sleep or retry by themselves:

* `Authorization: Bearer <key>` on every request. The key lives only in the headers of the
  underlying `httpx.Client`; it never reaches a log record, an exception text or a repr.
* Adaptive concurrency: every request passes through a limiter that starts at about 20 requests
  in flight, doubles after each window of healthy answers until the first 429 (slow start), then
  adds one slot per window (AIMD) and halves on a 429.
* A polite pace (`pacing.RatePacer`): from the first 429 on, every worker's requests are spaced
  at a rate learnt from the API's answers (a little below what it answered when it refused), so
  a rate-limited tenant sees few refused requests instead of a worker knocking per 429.
* 429 honours `Retry-After` (seconds, or an HTTP date read against the response's own `Date`
  header), else exponential backoff with full jitter. 500/502/503/504, timeouts, dropped
  connections and 200 answers whose body is not JSON are retried a bounded number of times.
  401/403 and 404 fail at once with a message that says what is probably wrong.
* Nothing hangs: each attempt (connect, TLS, headers, body) ends within `timeout` in total, a
  request waits at most `max_retry_wait` seconds between its attempts altogether (a longer
  `Retry-After` fails it at once, quoting the server), and `stop()` ends every request within a
  fraction of a second with `EsperInterrupted`, never retried.
* `next` links are followed only on the configured origin, under the configured base path. A
  link saying `http://`, another port, or another host of the same service (`*.esper.cloud`, or
  loopback) is moved onto the configured origin, as Esper's own tool does; any other link raises
  `EsperConfigError` before anything is sent, so the bearer token cannot leak to another host.
* Per-route counters (requests, retries, 429s, errors, bytes, seconds) for the run summary.

Example:
    >>> with EsperClient("https://acme-api.esper.cloud/api", api_key, enterprise_id) as client:
    ...     body = client.get("/v2/devices/", {"cursor": "start", "limit": 1000})
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import math
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from itertools import islice
from typing import Any, TypeVar

import httpcore
import httpx
import orjson

from .pacing import RatePacer

__all__ = [
    "EsperAPIError",
    "EsperAuthError",
    "EsperClient",
    "EsperConfigError",
    "EsperError",
    "EsperInterrupted",
    "EsperNotFoundError",
    "EsperResponseError",
    "RouteStats",
]

log = logging.getLogger("esper_warehouse.client")

T = TypeVar("T")
R = TypeVar("R")

RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_LONG_HEX_RE = re.compile(r"^[0-9a-fA-F]{16,}$")
_CONNECTIONS_PER_POOL = 8  # connections per httpx pool; see EsperClient.__init__
_HEADER_SAFE_RE = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII: what a header value may carry
# A blocked socket read wakes this often to notice `EsperClient.stop()` (see `_GuardedStream`).
_STOP_POLL_S = 0.25


def _wait_interruptibly(wait: Callable[..., T], timed_out: type[Exception]) -> T:
    """Call `wait(timeout=...)` in slices of `_STOP_POLL_S` until it returns a value.

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
            return wait(timeout=_STOP_POLL_S)
        except timed_out:
            continue


# --------------------------------------------------------------------------------------- errors


class EsperError(Exception):
    """Base of every error the client raises. Its message never contains the API key.

    Attributes:
        status: The HTTP status of the last answer, or None (no answer, or not an HTTP problem).
        route: The route template, e.g. ``"GET /v2/devices/{id}/device-apps/"``, or None.
    """

    def __init__(self, message: str, *, status: int | None = None, route: str | None = None):
        super().__init__(message)
        self.status = status
        self.route = route


class EsperAuthError(EsperError):
    """The API key was refused (401/403). Never retried."""


class EsperNotFoundError(EsperError):
    """The API answered 404.

    Attributes:
        tenant_level: True when the path names no record below the tenant (a list route or
            ``/enterprise/{eid}/...`` itself), so the enterprise id or base URL is the likely cause.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 404,
        route: str | None = None,
        tenant_level: bool = False,
    ):
        super().__init__(message, status=status, route=route)
        self.tenant_level = tenant_level


class EsperAPIError(EsperError):
    """Retries exhausted (429, 5xx, timeout, dropped connection), or another 4xx answer."""


class EsperResponseError(EsperError):
    """A body that is not the JSON expected (malformed page), after bounded retries."""


class EsperConfigError(EsperError):
    """Bad settings: base URL, key, limits, or a link that leaves the configured origin."""


class EsperUnavailableError(EsperError):
    """A table cannot be read in this run, though the run's first requests proved the settings.

    A missing capability, not a wrong setting: the key lacks a scope, the tenant's plan lacks
    the feature, the route does not serve this platform, or a quota (Data Tap) is spent. The run
    skips that table, names it with `reason`, loads the rest and ends partial.

    Attributes:
        table: The raw table that is skipped (e.g. ``"status_metrics"``, ``"data_tap_daily"``).
        reason: A short likely meaning for people, e.g. ``"missing scope or plan feature"``.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str,
        reason: str,
        status: int | None = None,
        route: str | None = None,
    ):
        super().__init__(message, status=status, route=route)
        self.table = table
        self.reason = reason


_UNAVAILABLE_MEANING = {
    403: "refused for this route: the key lacks a scope or the plan lacks the feature",
    404: "route not served for this tenant: plan, platform or API version",
}


class EsperInterrupted(KeyboardInterrupt):
    """The client was stopped (`EsperClient.stop()`, `close()`, or Ctrl-C during `map`).

    A `KeyboardInterrupt`, not an `EsperError`: an interruption is not an API failure, is never
    retried, and passes through every ``except Exception`` on its way to the run, which reports
    it as interrupted. Requests in flight when the client stops end with it within about
    `_STOP_POLL_S` seconds; no request is sent after it.
    """


# ---------------------------------------------------------------------------------------- stats


@dataclass
class RouteStats:
    """Counters for one route template (or, from `EsperClient.totals`, for all of them).

    Attributes:
        requests: Attempts sent, retries included.
        retries: Attempts that were repeated after a failure or a 429.
        throttled: 429 answers.
        errors: Attempts that failed for any other reason (5xx, other 4xx, timeout, dropped
            connection, body not JSON).
        bytes: Bytes received on the wire (compressed size when gzip was used).
        seconds: Time spent in attempts (waits between retries not included).
    """

    requests: int = 0
    retries: int = 0
    throttled: int = 0
    errors: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add(self, other: RouteStats) -> None:
        """Add the counters of `other` to these."""
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


# -------------------------------------------------------------------------------------- limiter


class _AdaptiveLimiter:
    """Bounds requests in flight: slow start, then additive increase, halving on a 429 (AIMD).

    The API's guidance is to start at about 20 requests in flight and build up. Until the first
    429 the limit doubles after each window of healthy answers (a window = `limit` answers, about
    one round trip), so a run reaches the maximum within a few round trips instead of after
    hundreds of answers; after the first 429 it grows by one slot per window (classic AIMD), since
    the API has then shown where its limit lies.

    A burst of 429s from requests that were all in flight together halves the limit once, not
    once per answer: every slot remembers the "epoch" it was taken in, and only a 429 from the
    current epoch lowers the limit (and starts a new epoch).

    Urgent requests take the next free slot before bulk ones (`EsperClient.map(bulk=True)`): a
    background fan-out puts hundreds of independent requests in the queue, and the requests the
    rest of the run waits on (the next page of the device scan, the other lists) should not
    queue behind them. Each kind waits on its own condition, so a release wakes only waiters
    that can use the slot.
    """

    def __init__(self, initial: int, minimum: int, maximum: int) -> None:
        lock = threading.Lock()
        self._urgent = threading.Condition(lock)
        self._bulk = threading.Condition(lock)
        self.limit = initial
        self.minimum = minimum
        self.maximum = maximum
        self._in_flight = 0
        self._urgent_waiting = 0
        self._healthy = 0
        self._epoch = 0
        self._slow_start = True  # until the first 429

    def acquire(self, urgent: bool = True) -> int:
        """Wait for a free slot and take it. Returns the epoch to hand back to `release`."""
        with self._urgent:
            if urgent:
                self._urgent_waiting += 1
                while self._in_flight >= self.limit:
                    self._urgent.wait(_STOP_POLL_S)  # timed: see `_wait_interruptibly`
                self._urgent_waiting -= 1
            else:
                while self._in_flight >= self.limit or self._urgent_waiting:
                    self._bulk.wait(_STOP_POLL_S)
            self._in_flight += 1
            self._wake()  # slots may be left over for the other kind
            return self._epoch

    def release(self, epoch: int, outcome: str) -> None:
        """Give a slot back and adapt the limit.

        Args:
            epoch: What `acquire` returned for this slot.
            outcome: ``"healthy"`` (counts towards an increase), ``"throttled"`` (a 429) or
                ``"neutral"`` (anything else: errors neither raise nor lower the limit).
        """
        with self._urgent:
            self._in_flight -= 1
            if outcome == "throttled":
                if epoch == self._epoch:
                    self.limit = max(self.minimum, self.limit // 2)
                    self._epoch += 1
                    self._healthy = 0
                    self._slow_start = False
            elif outcome == "healthy":
                self._healthy += 1
                if self._healthy >= self.limit:
                    self._healthy = 0
                    grown = self.limit * 2 if self._slow_start else self.limit + 1
                    self.limit = min(self.maximum, grown)
            self._wake()

    def _wake(self) -> None:
        """Wake as many waiters as there are free slots, urgent ones first (lock held).

        Not `notify_all`: with hundreds of threads waiting (several fan-outs at once), waking
        all of them on every answer costs real CPU.
        """
        free = self.limit - self._in_flight
        if free > 0:
            (self._urgent if self._urgent_waiting else self._bulk).notify(free)


# ----------------------------------------------------------------------- deadline and stop guard


class _Guard:
    """The total deadline of the calling thread's attempt, and the client's stop flag.

    httpx applies its timeouts to each socket operation: a server that trickles its answer one
    byte at a time never trips a read timeout, so a 470-byte answer at one byte every 2 s took
    ~940 s under a 60 s `request_timeout`. Every socket operation of the client goes through
    `_GuardedStream`, which asks this guard how long it may block: never past the attempt's
    deadline (connect, TLS, headers and body together), and never more than `_STOP_POLL_S` at a
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


class _GuardedStream(httpcore.NetworkStream):
    """A socket stream whose every operation is bounded by the `_Guard` (see there)."""

    def __init__(self, stream: httpcore.NetworkStream, guard: _Guard) -> None:
        self._stream = stream
        self._guard = guard

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = self._guard.bound(until, httpcore.ReadTimeout)
            try:
                # A socket read that times out loses nothing (plain or TLS): try again.
                return self._stream.read(max_bytes, min(left, _STOP_POLL_S))
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
        return _GuardedStream(
            self._stream.start_tls(ssl_context, server_hostname, wait), self._guard
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)

    def _bounded(self, timeout: float | None, error: type[Exception]) -> float | None:
        until = None if timeout is None else time.monotonic() + timeout
        left = self._guard.bound(until, error)
        return None if left == math.inf else left


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, with every stream it opens wrapped in `_GuardedStream`."""

    def __init__(self, guard: _Guard) -> None:
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
        return _GuardedStream(stream, self._guard)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:  # pragma: no cover - the client speaks TCP only
        return _GuardedStream(
            self._inner.connect_unix_socket(path, timeout, socket_options), self._guard
        )

    def sleep(self, seconds: float) -> None:  # pragma: no cover - unused by HTTP/1.1
        self._inner.sleep(seconds)


def _guarded_transport(guard: _Guard, tls: Any, limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's transport, its socket operations bounded by `guard`.

    httpx does not take a network backend; its connection pool (`httpcore.ConnectionPool`) does,
    so the backend is set on the pool it built. Checked here, so that an httpx upgrade that moves
    it fails at construction (and in the tests), not silently.
    """
    transport = httpx.HTTPTransport(verify=tls, limits=limits)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpx/httpcore changed: cannot bound requests by a total deadline")
    pool._network_backend = _GuardedBackend(guard)
    return transport


# A 429 costs no retry (the wait budget bounds it); this many 429s in a row end a request anyway
# (a server answering 429 with `Retry-After: 0` would otherwise be asked for ever).
_MAX_THROTTLED = 100


@dataclass
class _Retry:
    """A failed attempt that may be repeated."""

    reason: str  # for logs and the final error: "HTTP 503", "timeout (ReadTimeout)", ...
    status: int | None
    wait: float | None = None  # a server-imposed wait (Retry-After); None: use backoff
    retry_after: str | None = None  # the Retry-After header as the server wrote it
    malformed: bool = False


@dataclass
class _Value:
    """A successful attempt's parsed body."""

    value: Any


# --------------------------------------------------------------------------------------- client


class EsperClient:
    """A thread-safe client for one Esper tenant.

    Args:
        base_url: The API root, e.g. ``"https://acme-api.esper.cloud/api"``. Must be HTTPS unless
            its host is loopback (127.0.0.0/8, ::1, localhost).
        api_key: The bearer token. Kept only in the HTTP client's headers.
        enterprise_id: The tenant's enterprise id (used by the legacy paths; named in 404s).
        timeout: Seconds for connect, read, write and pool waits of one attempt.
        initial_concurrency: Requests in flight at the start.
        max_concurrency: Upper bound of the adaptive limit; also the connection pool size and the
            number of worker threads of `map`.
        min_concurrency: Lower bound of the adaptive limit.
        max_retries: Retries per request after the first attempt (429, 5xx, timeouts, dropped
            connections, bodies that are not JSON).
        backoff_base: First backoff cap in seconds; the cap doubles per retry (full jitter).
        backoff_max: Largest backoff cap in seconds.
        transport: An httpx transport to use instead of the network (tests). Without one, every
            attempt (connect, TLS, headers and body) is bounded by `timeout` in total.
        sleep: How to wait between retries (tests inject a recorder). By default a wait that
            `stop()` ends within `_STOP_POLL_S` seconds.
        rng: Source of jitter (tests inject a seeded one).
        max_retry_wait: Seconds one request may spend waiting between its attempts, in total
            (`Retry-After`, backoff, a cooldown another request's 429 imposed). When the API asks
            for a longer wait than is left, the request fails at once, quoting the API's value.
        clock: Monotonic seconds for the waits (tests inject one that `sleep` advances).
        key_name: Where the key came from (an environment variable), named when it is refused.
        pace: Pace requests at the rate learnt from 429s (`pacing.py`). `doctor` turns it off:
            it sends one request at a time within its own request and time allowances.

    Raises:
        EsperConfigError: A bad base URL, a missing or unusable key, or inconsistent limits.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        enterprise_id: str | None = None,
        *,
        timeout: float = 60.0,
        initial_concurrency: int = 20,
        max_concurrency: int = 64,
        min_concurrency: int = 2,
        max_retries: int = 8,
        backoff_base: float = 0.5,
        backoff_max: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
        max_retry_wait: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        key_name: str = "SOURCES__ESPER__API_KEY",
        pace: bool = True,
    ) -> None:
        self.base_url = _normalise_base_url(base_url)
        self.key_name = key_name  # where the key came from, named when the API refuses it
        base = httpx.URL(self.base_url)
        self._origin = _origin(base)
        self._rewrites_logged: set[tuple[str, str]] = set()
        self._base_path = base.path.rstrip("/")
        self.enterprise_id = enterprise_id
        # Set by the run once its first requests proved the key and the enterprise id
        # (`common.open_run`): from then on a 403/404 on a tenant-level route is a missing
        # capability (`EsperUnavailableError`), not a wrong setting.
        self.settings_proven = False

        if not 1 <= min_concurrency <= max_concurrency:
            raise EsperConfigError(
                f"concurrency bounds must satisfy 1 <= min ({min_concurrency}) <= max "
                f"({max_concurrency})"
            )
        if max_retries < 0 or timeout <= 0 or backoff_base < 0 or backoff_max < 0:
            raise EsperConfigError("timeout must be > 0; max_retries and backoff must be >= 0")
        if not max_retry_wait >= 0:  # NaN too
            raise EsperConfigError(f"max_retry_wait must be >= 0 seconds, not {max_retry_wait}")
        self._max_concurrency = max_concurrency
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_wait = max_retry_wait
        self._timeout = timeout
        self._guard = _Guard()
        self._sleep = sleep if sleep is not None else self._sleep_unless_stopped
        self._clock = clock
        self._rng = rng or random.Random()
        self._pacer = RatePacer(clock) if pace else None
        self._limiter = _AdaptiveLimiter(
            min(max(initial_concurrency, min_concurrency), max_concurrency),
            min_concurrency,
            max_concurrency,
        )

        self._lock = threading.Lock()  # guards the counters, the server time and the cooldown
        self._stats: dict[str, RouteStats] = {}
        self._server_time: datetime | None = None
        self._cooldown_until = 0.0  # monotonic time before which no request is sent (Retry-After)

        # Several small connection pools instead of one large one: httpcore scans every
        # connection of its pool on each request and release (quadratic in the pool's size), which
        # with 64 connections in one pool cost about a fifth of a full load's CPU. Each thread
        # sticks to one pool (so its connections stay warm); the limiter bounds requests in
        # flight across all of them.
        headers = {
            "Authorization": f"Bearer {_check_key(api_key)}",
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
        self._pools = [
            httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(timeout),
                follow_redirects=False,
                transport=transport or _guarded_transport(self._guard, tls, limits),
            )
            for _ in range(pools)
        ]
        self._http = self._pools[0]  # the headers (for redaction) are the same in every pool
        self._pool_turn = itertools.count()  # which pool the next new thread gets
        self._thread = threading.local()

    # ------------------------------------------------------------------------------ public API

    def get(self, path_or_url: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET a path under the base URL, or an absolute URL on the same origin (a `next` link).

        Args:
            path_or_url: ``"/v2/devices/"`` (relative to the base URL) or an absolute URL.
            params: Query parameters, merged with any already in the URL.

        Returns:
            The parsed JSON body (None for an empty 204 answer).

        Raises:
            EsperConfigError: The URL leaves the configured origin or base path (nothing sent).
            EsperAuthError, EsperNotFoundError, EsperAPIError, EsperResponseError: See the module.
        """
        return self._request("GET", path_or_url, params=params)

    def post(self, path: str, json: Any, *, retry: bool = True) -> Any:
        """POST a JSON body to a path under the base URL and return the parsed JSON answer.

        Retried like `get` unless `retry` is False: a Data Tap submission is sent once, since a
        retried POST after an uncertain answer may start (and pay quota for) a second job.
        """
        return self._request("POST", path, body=orjson.dumps(json), retry=retry)

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, bulk: bool = False) -> Iterator[R]:
        """Run `fn(item)` for every item on worker threads; yield results as they complete.

        Each request `fn` makes passes through the adaptive limiter, so the number of requests in
        flight follows the limit whatever the number of threads. Items are read lazily and at most
        ``2 * max_concurrency`` calls are queued at once, so a long generator of items is fine.

        Args:
            fn: Called once per item, on a worker thread.
            items: Any iterable; consumed as work is handed out.
            bulk: Background work (a large fan-out that nothing else waits on): its requests
                take a free slot only when no other request is waiting for one, so the
                sequential reads of the run (scan pages, lists) never queue behind it.

        Yields:
            Each `fn(item)` result, in completion order (not item order).

        Raises:
            Exception: The first exception raised by `fn`, after cancelling the calls that have
                not started and waiting for those that have.
        """
        window = 2 * self._max_concurrency
        source = iter(items)
        # Finished calls queue themselves here (a done-callback): taking the next one is O(1),
        # where `concurrent.futures.wait` would re-register a waiter on every pending call.
        finished: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
        pending: set[Future[R]] = set()
        with ThreadPoolExecutor(
            max_workers=self._max_concurrency,
            thread_name_prefix="esper-map",
            initializer=self._mark_bulk if bulk else None,
        ) as pool:

            def submit(count: int) -> None:
                for item in islice(source, count):
                    future = pool.submit(fn, item)
                    pending.add(future)
                    future.add_done_callback(finished.put)

            submit(window)
            try:
                while pending:
                    future = _wait_interruptibly(finished.get, queue.Empty)
                    pending.discard(future)
                    error = future.exception()
                    if error is not None:
                        raise error
                    submit(1)  # before yielding: the pool keeps working while the caller does
                    yield future.result()
            except KeyboardInterrupt:
                self.stop()  # Ctrl-C: the workers' requests end now instead of being retried
                raise
            finally:
                for future in pending:
                    future.cancel()

    def read_ahead(self, items: Iterator[T]) -> Iterator[T]:
        """Yield from `items` while its next item is already being produced on another thread.

        For a sequential page walk (a cursor list can only be read in order): the next page's
        request is in flight while the caller converts and loads the current one. At most one
        item is read ahead; closing this generator lets the item being read finish, then stops.
        """
        done = object()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="esper-read-ahead") as pool:
            future = pool.submit(next, items, done)
            try:
                while True:
                    # Wait with `exception`, which raises TimeoutError only for its own timeout
                    # (`result` would also re-raise a TimeoutError of the page walk).
                    _wait_interruptibly(future.exception, TimeoutError)
                    if (item := future.result()) is done:
                        break
                    future = pool.submit(next, items, done)
                    yield item
            except KeyboardInterrupt:
                self.stop()
                raise
            finally:
                future.cancel()

    @property
    def server_time(self) -> datetime | None:
        """The API's clock: the `Date` header of the latest response (aware, UTC), or None."""
        with self._lock:
            return self._server_time

    @property
    def concurrency(self) -> int:
        """The current adaptive limit of requests in flight."""
        return self._limiter.limit

    def stats(self) -> dict[str, RouteStats]:
        """Copies of the counters, keyed by route template (``"GET /v2/devices/{id}/"``)."""
        with self._lock:
            return {route: RouteStats(**vars(s)) for route, s in sorted(self._stats.items())}

    def totals(self) -> RouteStats:
        """The counters of all routes added up."""
        total = RouteStats()
        for route_stats in self.stats().values():
            total.add(route_stats)
        return total

    def stop(self) -> None:
        """Stop every request of this client, now and for good (Ctrl-C, a signal handler).

        Safe to call from any thread or a signal handler (it sets a flag, takes no lock). Requests
        in flight and waits between retries end within about `_STOP_POLL_S` seconds, and every
        request (new, in flight or waiting) raises `EsperInterrupted` instead of being retried.
        """
        self._guard.stopped = True

    @property
    def stopped(self) -> bool:
        """True once `stop()` or `close()` was called."""
        return self._guard.stopped

    def close(self) -> None:
        """Stop the client (see `stop`) and close the connection pools."""
        self._guard.stopped = True
        for pool in self._pools:
            pool.close()

    def __enter__(self) -> EsperClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EsperClient(base_url={self.base_url!r}, enterprise_id={self.enterprise_id!r}, "
            f"concurrency={self.concurrency})"
        )

    # --------------------------------------------------------------------------- the machinery

    def _request(
        self,
        method: str,
        path_or_url: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        retry: bool = True,
    ) -> Any:
        """Send one logical request: resolve and check the URL, then attempt, retry, or raise."""
        url = self._resolve(path_or_url)
        route = f"{method} {self._template(url.path)}"
        retries = 0
        throttled = 0  # 429 answers: throttling, not failure; bounded by the wait budget
        waited = 0.0  # seconds this request spent waiting, bounded by max_retry_wait
        while True:
            waited += self._wait_cooldown(self._max_retry_wait - waited)
            outcome = self._attempt(method, url, route, params, body)
            if not isinstance(outcome, _Retry):
                return outcome.value
            if not retry:
                self._give_up(route, outcome, attempts=1)
            if outcome.status == 429 and throttled < _MAX_THROTTLED:
                # Under a rate limit many requests wait out the same window and race for it
                # again: losing that race is not a failure (a 25 req/s tenant exhausted eight
                # retries with 20 requests in flight). The wait budget still bounds the request.
                throttled += 1
            elif retries >= self._max_retries:
                self._give_up(route, outcome, attempts=retries + throttled + 1)
            else:
                retries += 1
            self._count(route, retries=1)
            waited += self._wait_before_retry(
                route, outcome, retries + throttled, self._max_retry_wait - waited
            )

    def _attempt(
        self,
        method: str,
        url: httpx.URL,
        route: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
    ) -> _Value | _Retry:
        """Make one attempt under a limiter slot; classify the answer.

        Returns:
            `_Value` with the parsed body, or `_Retry` describing a retryable failure.

        Raises:
            EsperError: For answers that are never retried (401/403, 404, other 4xx, 3xx).
        """
        self._check_stopped(route)
        epoch = self._limiter.acquire(urgent=not getattr(self._thread, "bulk", False))
        started = time.monotonic()
        limiter_outcome = "neutral"
        stats = RouteStats()
        try:
            # Paced last, with the slot taken: the request goes out when its pace slot is due,
            # never later behind other waits (a late burst is what the pacer prevents).
            reserved_at = self._clock()
            pace = self._pacer.reserve() if self._pacer else 0.0  # the rate learnt from 429s
            if pace > 0:
                self._sleep(pace)
            self._check_stopped(route)
            stats.requests = 1
            self._guard.begin(self._timeout)
            try:
                response = self._http_for_thread().request(
                    method,
                    url,
                    params=params,
                    content=body,
                    headers={"Content-Type": "application/json"} if body is not None else None,
                )
            except Exception as exc:
                # A stopped client's requests fail in all sorts of ways (a closed pool, a read
                # cut short): none of them is worth a retry or a warning.
                self._check_stopped(route)
                if isinstance(exc, httpx.TimeoutException):
                    reason = f"timeout ({type(exc).__name__}: {exc})"
                elif isinstance(exc, httpx.TransportError):
                    reason = f"connection failed ({type(exc).__name__}: {exc})"
                elif isinstance(exc, httpx.DecodingError):
                    reason = f"undecodable body ({exc})"
                else:
                    raise
                failure: Exception | None = exc
            else:
                failure = None
            finally:
                self._guard.end()
            if failure is not None:
                stats.errors = 1
                return _Retry(
                    reason=self._redact(reason),
                    status=None,
                    malformed=isinstance(failure, httpx.DecodingError),
                )

            stats.bytes = response.num_bytes_downloaded or len(response.content)
            self._note_date(response)
            status = response.status_code
            if self._pacer is not None:
                self._pacer.answered(throttled=status == 429, reserved_at=reserved_at)
            log.debug("%s -> %s (%d bytes)", route, status, stats.bytes)
            if status == 429:
                stats.throttled = 1
                limiter_outcome = "throttled"
                return _Retry(
                    reason=f"HTTP 429 (throttled){self._api_message(response)}",
                    status=429,
                    wait=self._retry_after(response),
                    retry_after=response.headers.get("retry-after", "").strip() or None,
                )
            if status in RETRYABLE_STATUSES:
                stats.errors = 1
                return _Retry(reason=f"HTTP {status}{self._api_message(response)}", status=status)
            if 200 <= status < 300:
                if status == 204 or not response.content:
                    limiter_outcome = "healthy"
                    return _Value(None)
                try:
                    value = orjson.loads(response.content)
                except orjson.JSONDecodeError:
                    stats.errors = 1
                    return _Retry(
                        reason=f"HTTP {status} with a body that is not valid JSON "
                        f"({len(response.content)} bytes: {self._snippet(response)!r})",
                        status=status,
                        malformed=True,
                    )
                limiter_outcome = "healthy"
                return _Value(value)
            stats.errors = 1
            limiter_outcome = "healthy"  # the server is answering fine; the request is wrong
            raise self._final_error(route, response)
        finally:
            stats.seconds = time.monotonic() - started
            self._limiter.release(epoch, limiter_outcome)
            if stats.requests:
                self._count(route, **vars(stats))

    def _check_stopped(self, route: str) -> None:
        """Raise `EsperInterrupted` once the client is stopped."""
        if self._guard.stopped:
            raise EsperInterrupted(f"{route}: not sent, the client was stopped") from None

    def _sleep_unless_stopped(self, seconds: float) -> None:
        """Sleep, waking every `_STOP_POLL_S` to end at once when the client is stopped."""
        until = time.monotonic() + seconds
        while not self._guard.stopped and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, _STOP_POLL_S))

    def _mark_bulk(self) -> None:
        """Requests from this thread (a bulk `map` worker) yield limiter slots to the others."""
        self._thread.bulk = True

    def _http_for_thread(self) -> httpx.Client:
        """The connection pool of the calling thread (assigned in turn on its first request)."""
        pool = getattr(self._thread, "http", None)
        if pool is None:
            pool = self._thread.http = self._pools[next(self._pool_turn) % len(self._pools)]
        return pool

    def _final_error(self, route: str, response: httpx.Response) -> EsperError:
        """The error for an answer that is never retried (401/403, 404, 3xx, other 4xx)."""
        status = response.status_code
        if self.settings_proven and (
            status == 403 or (status == 404 and self._is_tenant_level(route))
        ):
            return EsperUnavailableError(
                f"{route} answered {status} ({_UNAVAILABLE_MEANING[status]})",
                table="",  # the resource that asked names its table (common.skip_unavailable)
                reason=_UNAVAILABLE_MEANING[status],
                status=status,
                route=route,
            )
        if status in (401, 403):
            return EsperAuthError(
                f"the API key was refused (HTTP {status}) by {self._origin_text()}: check the "
                f"key ({self.key_name}) and that it belongs to this tenant",
                status=status,
                route=route,
            )
        message = self._api_message(response)
        if status == 404:
            if self._is_tenant_level(route):
                eid = (
                    f"the enterprise id ({self.enterprise_id})"
                    if self.enterprise_id
                    else "the enterprise id (none configured)"
                )
                text = (
                    f"{route} answered 404 Not Found{message}: {eid} or the base URL "
                    f"({self.base_url}) is probably wrong"
                )
                return EsperNotFoundError(text, route=route, tenant_level=True)
            return EsperNotFoundError(
                f"{route} answered 404 Not Found{message} (the record may have been removed)",
                route=route,
            )
        if 300 <= status < 400:
            where = _location_origin(response.headers.get("location", ""))
            return EsperAPIError(
                f"{route} answered an unexpected redirect (HTTP {status}) to {where}; "
                "redirects are not followed (check the base URL)",
                status=status,
                route=route,
            )
        return EsperAPIError(
            self._redact(f"{route} answered HTTP {status}{message}"), status=status, route=route
        )

    def _give_up(self, route: str, last: _Retry, attempts: int) -> None:
        """Raise the typed error once the retries of a request are exhausted."""
        text = f"{route} failed after {attempts} attempts; last: {last.reason}"
        log.error("%s", text)
        if last.malformed:
            raise EsperResponseError(text, status=last.status, route=route)
        raise EsperAPIError(text, status=last.status, route=route)

    def _wait_before_retry(self, route: str, failure: _Retry, retry: int, budget: float) -> float:
        """Log the retry and wait: a shared cooldown for Retry-After, else jittered backoff.

        Args:
            budget: Seconds this request may still wait (what is left of `max_retry_wait`).

        Returns:
            The seconds waited here (a Retry-After wait happens in `_wait_cooldown`: 0).

        Raises:
            EsperAPIError: The API asked (Retry-After) for a longer wait than `budget`.
        """
        if failure.wait is not None:
            asked = _seconds_text(failure.wait)
            header = failure.retry_after or ""
            quoted = "Retry-After" if header == asked else f"Retry-After: {header}"
            if failure.wait > budget:
                text = (
                    f"{route}: the API asked to wait {asked} s ({quoted}) before retrying, more "
                    f"than the {_seconds_text(max(budget, 0.0))} s left of the "
                    f"{_seconds_text(self._max_retry_wait)} s a request may wait "
                    "(max_retry_wait_s); the tenant is probably over its API quota: try again "
                    "later"
                )
                log.error("%s", text)
                raise EsperAPIError(text, status=failure.status, route=route)
            # The server said when to come back: hold every request of this client until then.
            with self._lock:
                self._cooldown_until = max(self._cooldown_until, self._clock() + failure.wait)
            log.warning(
                "%s: %s; the API asked to wait %s s (%s): retry %d/%d then (concurrency %d)",
                route,
                failure.reason,
                asked,
                quoted,
                retry,
                self._max_retries,
                self.concurrency,
            )
            return 0.0  # _wait_cooldown() sleeps before the next attempt
        cap = min(self._backoff_max, self._backoff_base * 2 ** (retry - 1))
        delay = min(self._rng.uniform(0, cap), max(budget, 0.0))
        log.warning(
            "%s: %s; retry %d/%d in %.2f s (concurrency %d)",
            route,
            failure.reason,
            retry,
            self._max_retries,
            delay,
            self.concurrency,
        )
        self._sleep(delay)
        return delay

    def _wait_cooldown(self, budget: float) -> float:
        """Sleep until the shared Retry-After cooldown, at most `budget` s; the seconds slept."""
        with self._lock:
            remaining = self._cooldown_until - self._clock()
        wait = min(remaining, max(budget, 0.0))
        if wait <= 0:
            return 0.0
        self._sleep(wait)
        return wait

    def _retry_after(self, response: httpx.Response) -> float | None:
        """Seconds to wait from a `Retry-After` header, or None when absent or unreadable.

        An HTTP date is read against the response's own `Date` header (the server's clock), and
        only against the local clock when the response has no `Date`.
        """
        value = response.headers.get("retry-after", "").strip()
        if not value:
            return None
        try:
            seconds = float(value)
        except ValueError:
            try:
                target = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            now = _parse_date(response.headers.get("date")) or datetime.now(UTC)
            if target.tzinfo is None:
                target = target.replace(tzinfo=UTC)
            seconds = (target - now).total_seconds()
        if math.isnan(seconds):
            return None
        return max(seconds, 0.0)

    def _note_date(self, response: httpx.Response) -> None:
        """Remember the server's clock from the `Date` header."""
        date = _parse_date(response.headers.get("date"))
        if date is not None:
            with self._lock:
                self._server_time = date

    def _count(self, route: str, **increments: float) -> None:
        with self._lock:
            stats = self._stats.setdefault(route, RouteStats())
            for name, value in increments.items():
                setattr(stats, name, getattr(stats, name) + value)

    # --------------------------------------------------------------------------- URLs, routes

    def _resolve(self, path_or_url: str) -> httpx.URL:
        """Turn a path or an absolute link into a URL, refusing anything off the base URL.

        Raises:
            EsperConfigError: Another origin, a path outside the base path, credentials in the
                URL, or dot segments (checked before anything is sent).
        """
        try:
            if path_or_url.startswith("/") and not path_or_url.startswith("//"):
                url = httpx.URL(self.base_url + path_or_url)  # the usual case: a path
            else:
                url = httpx.URL(path_or_url)
                if not (url.scheme or url.host):  # "v2/devices/": a path after all
                    url = httpx.URL(f"{self.base_url}/{path_or_url}")
                elif _origin(url) != self._origin or url.userinfo:
                    url = self._onto_configured_origin(url)
        except httpx.InvalidURL as exc:
            raise EsperConfigError(f"not a usable path or URL ({exc})") from None
        segments = url.path.split("/")
        under_base = url.path == self._base_path or url.path.startswith(self._base_path + "/")
        if not under_base or "." in segments or ".." in segments:
            raise EsperConfigError(
                f"refusing to request {url.path!r}: it is not under the base path "
                f"{self._base_path or '/'!r} of {self._origin_text()}"
            )
        return url

    def _onto_configured_origin(self, url: httpx.URL) -> httpx.URL:
        """A link off the configured origin, moved onto it when it names the same service.

        Esper's own support tool rewrites `next` links that say `http://`, or name another
        `*.esper.cloud` host, onto the configured host (live-observations.md section 12). Here:
        the same host with another scheme or port, or a host of the same service (both
        `*.esper.cloud`, or both loopback), keeps its path and query and moves onto the configured
        origin, so the key still goes nowhere else. Anything else is refused before sending.

        Raises:
            EsperConfigError: A link to another service, or one with credentials in it.
        """
        scheme, host, port = self._origin
        link_host = url.host.lower()
        if url.userinfo or not (link_host == host or _same_service(link_host, host)):
            raise EsperConfigError(
                f"refusing to follow a link to {_origin_text(url)}: only "
                f"{self._origin_text()} is trusted with the API key"
            )
        moved = url.copy_with(scheme=scheme, host=host, port=port)
        key = (_origin_text(url), self._template(url.path))
        if key not in self._rewrites_logged:
            self._rewrites_logged.add(key)
            log.info(
                "a link for %s named %s: followed on the configured %s instead",
                key[1],
                key[0],
                self._origin_text(),
            )
        return moved

    def _template(self, path: str) -> str:
        """The route template of a path: relative to the base path, ids replaced by ``{id}``."""
        relative = path[len(self._base_path) :] or "/"
        return "/".join(
            "{id}" if _looks_like_id(s) or s == self.enterprise_id else s
            for s in relative.split("/")
        )

    @staticmethod
    def _is_tenant_level(route: str) -> bool:
        """True when the route names no record: a list route or the enterprise itself.

        ``/enterprise/{id}/devicegroup/`` and ``/v2/devices/`` are tenant-level (a 404 there means
        the enterprise id or the base URL is wrong); ``/v2/devices/{id}/device-apps/`` is not.
        """
        segments = route.split(" ", 1)[1].split("/")
        for index, segment in enumerate(segments):
            if segment == "{id}" and not (index > 0 and segments[index - 1] == "enterprise"):
                return False
        return True

    def _origin_text(self) -> str:
        scheme, host, port = self._origin
        return _origin_text(httpx.URL(scheme=scheme, host=host, port=port))

    # ------------------------------------------------------------------------- message helpers

    def _api_message(self, response: httpx.Response) -> str:
        """The API's own error text from any family's error body, as ``": <text>"`` or ``""``.

        Legacy ``{errors, message, status}``, v0/v2 ``{code, message, content}`` and Reports
        ``{status, error, message}`` bodies are all understood.
        """
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return ""
        if not isinstance(body, dict):
            return ""
        parts: list[str] = []
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value.strip() and value not in parts:
                parts.append(value.strip())
        errors = body.get("errors")
        if isinstance(errors, list):
            parts.extend(str(e) for e in errors if str(e) not in parts)
        elif isinstance(errors, str | dict):
            parts.append(str(errors))
        text = "; ".join(parts)
        if len(text) > 300:
            text = text[:297] + "..."
        return f": {self._redact(text)}" if text else ""

    def _snippet(self, response: httpx.Response) -> str:
        return self._redact(response.content[:60].decode("utf-8", "replace"))

    def _redact(self, text: str) -> str:
        """Remove the API key from text built from server answers (belt and braces)."""
        key = self._http.headers.get("authorization", "").removeprefix("Bearer ")
        return text.replace(key, "[redacted]") if key else text


# ------------------------------------------------------------------------------------- helpers


def _normalise_base_url(base_url: str) -> str:
    """Check the base URL and return it without a trailing slash.

    Raises:
        EsperConfigError: Not http(s), no host, credentials/query/fragment, or plain HTTP to a
            host that is not loopback.
    """
    text = (base_url or "").strip()
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise EsperConfigError(f"the base URL {text!r} is not a valid URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise EsperConfigError(
            f"the base URL {text!r} must look like https://<tenant>-api.esper.cloud/api"
        )
    if url.userinfo or url.query or url.fragment:
        raise EsperConfigError(
            "the base URL must not carry credentials, a query or a fragment: "
            f"{_origin_text(url)}{url.path}"
        )
    if url.scheme == "http" and not _is_loopback(url.host):
        raise EsperConfigError(
            f"refusing plain HTTP to {url.host}: the API key would travel unencrypted; use "
            "https:// (plain http is only allowed on loopback: 127.0.0.0/8, ::1, localhost)"
        )
    return str(url.copy_with(path=url.path.rstrip("/") or "/")).rstrip("/")


def _check_key(api_key: str) -> str:
    """Return the key stripped of surrounding whitespace; refuse one unusable in a header."""
    key = (api_key or "").strip()
    if not key:
        raise EsperConfigError("no API key: set SOURCES__ESPER__API_KEY (or .dlt/secrets.toml)")
    if not _HEADER_SAFE_RE.match(key):
        raise EsperConfigError(
            "the API key contains characters that cannot be sent in an HTTP header "
            "(spaces, control or non-ASCII characters)"
        )
    return key


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same_service(link_host: str, configured_host: str) -> bool:
    """Two API hosts of one service: both `*.esper.cloud` (tenants' API hosts), or both loopback."""
    if link_host.endswith(".esper.cloud") and configured_host.endswith(".esper.cloud"):
        return True
    return _is_loopback(link_host) and _is_loopback(configured_host)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the default port made explicit."""
    scheme = url.scheme.lower()
    return scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(scheme)


def _origin_text(url: httpx.URL) -> str:
    scheme, host, port = _origin(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if port == _DEFAULT_PORTS.get(scheme) else f":{port}")


def _location_origin(location: str) -> str:
    """The origin a redirect points to, for an error message (never the full URL)."""
    try:
        target = httpx.URL(location)
    except httpx.InvalidURL:
        return "an unreadable location"
    return _origin_text(target) if target.is_absolute_url else "a relative location"


def _seconds_text(seconds: float) -> str:
    """Seconds as a person writes them: ``86400``, ``1.5``."""
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:.1f}"


def _looks_like_id(segment: str) -> bool:
    """Numeric, UUID-like or long hex path segments are record ids."""
    return bool(segment.isdigit() or _UUID_RE.match(segment) or _LONG_HEX_RE.match(segment))


def _parse_date(value: str | None) -> datetime | None:
    """An HTTP date (RFC 7231) as an aware UTC datetime, or None."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
