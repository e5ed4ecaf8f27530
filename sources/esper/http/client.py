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

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx
import orjson

from . import threads
from .answers import SNIPPET_CHARS, api_message, clip, parse_date, retry_after
from .deadline import STOP_POLL_S, Guard
from .errors import (
    EsperError,
    EsperInterrupted,
)
from .limiter import AdaptiveLimiter, check_limits
from .origin import Origin, check_key, tls_setting_error
from .pacing import RatePacer
from .pools import Pools
from .refusals import final_error
from .retry import MAX_THROTTLED, RETRYABLE_STATUSES, Retry, RetryWaits, Value
from .stats import Counters, RouteStats

log = logging.getLogger("esper_warehouse.client")

T = TypeVar("T")
R = TypeVar("R")


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
            `stop()` ends within `STOP_POLL_S` seconds.
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
        self.origin = Origin(base_url, enterprise_id)
        self.key_name = key_name  # where the key came from, named when the API refuses it
        # Set by the run once its first requests proved the key and the enterprise id
        # (`run/opening.py`): from then on a 403/404 on a tenant-level route is a missing
        # capability (`EsperUnavailableError`), not a wrong setting.
        self.settings_proven = False
        check_limits(min_concurrency, max_concurrency, max_retries, timeout, backoff_base,
                      backoff_max, max_retry_wait)  # fmt: skip
        self._max_concurrency = max_concurrency
        self._timeout = timeout
        self._guard = Guard()
        self._clock = clock
        self._retry = RetryWaits(
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            max_wait=max_retry_wait,
            sleep=sleep if sleep is not None else self._sleep_unless_stopped,
            clock=clock,
            rng=rng or random.Random(),
        )
        self._pacer = RatePacer(clock) if pace else None
        self._limiter = AdaptiveLimiter(
            min(max(initial_concurrency, min_concurrency), max_concurrency),
            min_concurrency,
            max_concurrency,
        )
        self._lock = threading.Lock()  # guards the server time
        self._counters = Counters()
        self._server_time: datetime | None = None
        self._pools = Pools(check_key(api_key), timeout, max_concurrency, self._guard, transport)
        self._thread = threading.local()

    @property
    def base_url(self) -> str:
        """The API root, checked and without a trailing slash."""
        return self.origin.base_url

    @property
    def enterprise_id(self) -> str | None:
        """The tenant's enterprise id."""
        return self.origin.enterprise_id

    # ------------------------------------------------------------------------------ public API

    def get(
        self, path_or_url: str, params: Mapping[str, Any] | None = None, *, retry: bool = True
    ) -> Any:
        """GET a path under the base URL, or an absolute URL on the same origin (a `next` link).

        Args:
            path_or_url: ``"/v2/devices/"`` (relative to the base URL) or an absolute URL.
            params: Query parameters, merged with any already in the URL.
            retry: False: one attempt (a Data Tap poll: every request spends the tenant's quota,
                and the next poll is the retry).

        Returns:
            The parsed JSON body (None for an empty 204 answer).

        Raises:
            EsperConfigError: The URL leaves the configured origin or base path (nothing sent).
            EsperAuthError, EsperNotFoundError, EsperAPIError, EsperResponseError: See the module.
        """
        return self._request("GET", path_or_url, params=params, retry=retry)

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
        yield from threads.map_concurrently(
            fn, items, self._max_concurrency, self._mark_bulk if bulk else None, self.stop
        )

    def map_in_order(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run `fn(item)` for every item on worker threads; yield results in item order.

        For a list read page by page whose pages must come in order: at most twice the current
        limit of requests in flight are started and not yet yielded, so a page that answers late
        holds back the pages after it (a bounded number of them) instead of letting the whole
        rest of the list arrive and wait in memory.
        """
        yield from threads.map_in_order(
            fn, items, self._max_concurrency, 2 * self.concurrency, self.stop
        )

    def read_ahead(self, items: Iterator[T]) -> Iterator[T]:
        """Yield from `items` while its next item is already being produced on another thread.

        For a sequential page walk (a cursor list can only be read in order): the next page's
        request is in flight while the caller converts and loads the current one. At most one
        item is read ahead; closing this generator lets the item being read finish, then stops.
        """
        yield from threads.read_ahead(items, self.stop)

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
        return self._counters.routes()

    def totals(self) -> RouteStats:
        """The counters of all routes added up."""
        return self._counters.totals()

    def pacing(self) -> dict[str, float | int | None]:
        """How the run was paced, for its record: the requests answered (not 429) per second
        from the first request sent to the last answer, the pace it ended at (None: never
        paced) and the 429s the pacer judged not this run's doing."""
        totals, span, pacer = self.totals(), self._counters.answering_s(), self._pacer
        answered = totals.requests - totals.throttled
        return {
            "answered": answered,
            "answered_per_s": answered / span if span > 0 else None,
            "pace": pacer.rate if pacer else None,
            "not_ours": pacer.not_ours if pacer else 0,
        }

    def stop(self) -> None:
        """Stop every request of this client, now and for good (Ctrl-C, a signal handler).

        Safe to call from any thread or a signal handler (it sets a flag, takes no lock). Requests
        in flight and waits between retries end within about `STOP_POLL_S` seconds, and every
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
        self._pools.close()

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
        url = self.origin.resolve(path_or_url)
        route = f"{method} {self.origin.template(url.path)}"
        retries = 0
        throttled = 0  # 429 answers: throttling, not failure; bounded by the wait budget
        waited = 0.0  # seconds this request spent waiting, bounded by max_retry_wait
        while True:
            waited += self._retry.wait_cooldown(self._retry.max_wait - waited)
            outcome = self._attempt(method, url, route, params, body)
            if not isinstance(outcome, Retry):
                return outcome.value
            if not retry:
                self._retry.give_up(route, outcome, attempts=1)
            if outcome.status == 429 and throttled < MAX_THROTTLED:
                # Under a rate limit many requests wait out the same window and race for it
                # again: losing that race is not a failure (a 25 req/s tenant exhausted eight
                # retries with 20 requests in flight). The wait budget still bounds the request.
                throttled += 1
            elif retries >= self._retry.max_retries:
                self._retry.give_up(route, outcome, attempts=retries + throttled + 1)
            else:
                retries += 1
            self._counters.count(route, retries=1)
            budget = self._retry.max_wait - waited
            waited += self._retry.wait_before_retry(
                route, outcome, retries + throttled, budget, self.concurrency
            )

    def _attempt(
        self,
        method: str,
        url: httpx.URL,
        route: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
    ) -> Value | Retry:
        """Make one attempt under a limiter slot; classify the answer.

        Returns:
            `Value` with the parsed body, or `Retry` describing a retryable failure.

        Raises:
            EsperError: For answers that are never retried (401/403, 404, other 4xx, 3xx).
        """
        self._check_stopped(route)
        epoch = self._limiter.acquire(urgent=not getattr(self._thread, "bulk", False))
        started = time.monotonic()
        stats = RouteStats()
        outcome = "neutral"  # what the limiter learns: "healthy", "throttled" or "neutral"
        try:
            # Paced last, with the slot taken: the request goes out when its pace slot is due,
            # never later behind other waits (a late burst is what the pacer prevents).
            reserved_at = self._clock()
            pace = self._pacer.reserve() if self._pacer else 0.0  # the rate learnt from 429s
            while self._pacer is not None and pace > 0:
                self._retry.sleep(pace)
                self._check_stopped(route)
                # A cut while this request waited re-spaces it at the new pace.
                now = self._clock()
                again = self._pacer.respace(reserved_at, reserved_at + pace)
                reserved_at, pace = (now, again) if again is not None else (reserved_at, 0.0)
            self._check_stopped(route)
            stats.requests = 1
            response = self._send(method, url, route, params, body)
            if isinstance(response, Retry):
                stats.errors = 1
                return response
            stats.bytes = response.num_bytes_downloaded or len(response.content)
            self._note_date(response, started)
            throttled = response.status_code == 429
            cut = self._pacer.answered(throttled, reserved_at) if self._pacer else throttled
            log.debug("%s -> %s (%d bytes)", route, response.status_code, stats.bytes)
            result, outcome = self._classify(route, response, stats)
            if throttled and not cut:
                # Not news for the pace (weather, the same overshoot): it waits for itself and
                # the limit of requests in flight stays.
                outcome = "neutral"
                if isinstance(result, Retry):
                    result.holds_all = False
            if isinstance(result, EsperError):
                raise result
            return result
        finally:
            stats.seconds = time.monotonic() - started
            self._limiter.release(epoch, outcome)
            if stats.requests:
                self._counters.count(route, **vars(stats))

    def _send(
        self,
        method: str,
        url: httpx.URL,
        route: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
    ) -> httpx.Response | Retry:
        """Send the attempt within its deadline: the answer, or a retryable transport failure."""
        self._guard.begin(self._timeout)
        try:
            return self._pools.for_thread().request(
                method,
                url,
                params=params,
                content=body,
                headers={"Content-Type": "application/json"} if body is not None else None,
            )
        except Exception as exc:
            # A stopped client's requests fail in all sorts of ways (a closed pool, a read cut
            # short): none of them is worth a retry or a warning.
            self._check_stopped(route)
            if isinstance(exc, httpx.TimeoutException):
                reason = f"timeout ({type(exc).__name__}: {exc})"
            elif (refused := tls_setting_error(exc, self.origin.text())) is not None:
                raise refused from None  # the base URL's fault: the same on every attempt
            elif isinstance(exc, httpx.TransportError):
                reason = f"connection failed ({type(exc).__name__}: {exc})"
            elif isinstance(exc, httpx.DecodingError):
                reason = f"undecodable body ({exc})"
            else:
                raise
            malformed = isinstance(exc, httpx.DecodingError)
            return Retry(reason=self.redact(reason), status=None, malformed=malformed)
        finally:
            self._guard.end()

    def _classify(
        self, route: str, response: httpx.Response, stats: RouteStats
    ) -> tuple[Value | Retry | EsperError, str]:
        """An answer as a value, a retry or a final error, with what the limiter learns from it.

        The final error is for answers that are never retried (401/403, 404, other 4xx, 3xx).
        """
        status = response.status_code
        if status == 429:
            stats.throttled = 1
            return Retry(
                reason=f"HTTP 429 (throttled){api_message(response, self.redact)}",
                status=429,
                wait=retry_after(response),
                retry_after=response.headers.get("retry-after", "").strip() or None,
            ), "throttled"
        if status in RETRYABLE_STATUSES:
            stats.errors = 1
            reason = f"HTTP {status}{api_message(response, self.redact)}"
            return Retry(reason=reason, status=status), "neutral"
        if 200 <= status < 300:
            if status == 204 or not response.content:
                return Value(None), "healthy"
            try:
                return Value(orjson.loads(response.content)), "healthy"
            except orjson.JSONDecodeError:
                stats.errors = 1
                return Retry(
                    reason=f"HTTP {status} with a body that is not valid JSON "
                    f"({len(response.content)} bytes: {self._snippet(response)!r})",
                    status=status,
                    malformed=True,
                ), "neutral"
        stats.errors = 1
        return final_error(route, response, self), "healthy"  # the server is fine; the request not

    def _check_stopped(self, route: str) -> None:
        """Raise `EsperInterrupted` once the client is stopped."""
        if self._guard.stopped:
            raise EsperInterrupted(f"{route}: not sent, the client was stopped") from None

    def _sleep_unless_stopped(self, seconds: float) -> None:
        """Sleep, waking every `STOP_POLL_S` to end at once when the client is stopped."""
        until = time.monotonic() + seconds
        while not self._guard.stopped and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, STOP_POLL_S))

    def _mark_bulk(self) -> None:
        """Requests from this thread (a bulk `map` worker) yield limiter slots to the others."""
        self._thread.bulk = True

    def _note_date(self, response: httpx.Response, sent: float) -> None:
        """Remember the server's clock from the `Date` header, and when answers came."""
        date = parse_date(response.headers.get("date"))
        self._counters.answered(sent)
        if date is not None:
            with self._lock:
                self._server_time = date

    def _snippet(self, response: httpx.Response) -> str:
        # the first 4 KB, redacted whole, then cut: a key straddling the cut is still found
        text = response.content[:4096].decode("utf-8", "replace")
        return clip(text, SNIPPET_CHARS, self.redact)

    def redact(self, text: str) -> str:
        """Remove the API key from text built from server answers (belt and braces)."""
        key = self._pools.key()
        return text.replace(key, "[redacted]") if key else text


# ------------------------------------------------------------------------------------- helpers
