"""The one HTTP client of the Esper source: auth, retries, rate limits, concurrency, origin checks.

Everything that talks to the Esper API goes through `EsperClient`. It owns the HTTP policy so that
resources never sleep or retry by themselves:

* `Authorization: Bearer <key>` on every request. The key lives only in the headers of the
  underlying `httpx.Client`; it never reaches a log record, an exception text or a repr.
* Adaptive concurrency: every request passes through a limiter (`limiter.AdaptiveLimiter`) that
  starts at about 20 requests in flight, doubles after each window of healthy answers until the
  first 429 (slow start), then adds one slot per window (AIMD) and halves on a 429.
* A polite pace (`pacing.RatePacer`): from the first 429 on, every worker's requests are spaced
  at a rate learnt from the API's answers (a little below what it answered when it refused), so
  a rate-limited tenant sees few refused requests instead of a worker knocking per 429.
* What an answer means and what follows it is decided by `policy.decide`, which returns a
  `Decision` that the client carries out (it sleeps; the policy never calls the client): 429
  honours `Retry-After` (seconds, or an HTTP date read against the response's own `Date`
  header), else exponential backoff with full jitter. 500/502/503/504, timeouts, dropped
  connections and 200 answers whose body is not JSON are retried a bounded number of times.
  401/403 and 404 fail at once with a message that says what is probably wrong.
* Nothing hangs: each attempt (connect, TLS, headers, body) ends within `timeout` in total
  (`transport.Guard`), a request waits at most `max_retry_wait` seconds between its attempts
  altogether (a longer `Retry-After` fails it at once, quoting the server), and `stop()` ends
  every request within a fraction of a second with `EsperInterrupted`, never retried.
* `next` links are followed only on the configured origin, under the configured base path. A
  link saying `http://`, another port, or another host of the same service (`*.esper.cloud`, or
  loopback) is moved onto the configured origin, as Esper's own tool does; any other link raises
  `EsperConfigError` before anything is sent, so the bearer token cannot leak to another host.
* Per-route counters (requests, retries, 429s, errors, bytes, seconds) for the run summary.

What it sends with sits beside it, by concern: `transport.py` (the connection pools, where the
headers and so the key live, and the total deadline of an attempt), `workers.py` (the threads of
`map`, `map_in_order` and `read_ahead`) and `counters.py` (what it counted).

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
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import httpx
import orjson

from .counters import Counters, RouteStats
from .errors import STOP_POLL_S, EsperConfigError, EsperInterrupted, redact
from .limiter import AdaptiveLimiter
from .origin import Origin, check_key
from .pacing import RatePacer
from .policy import Decision, Facts, Rules, Tries, decide, parse_date
from .transport import Guard, Pools
from .workers import map_concurrently, map_in_order, read_one_ahead

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
        url_name: Where the base URL came from, named when its host or TLS is wrong.
        pace: Pace requests at the rate learnt from 429s (`pacing.RatePacer`). `doctor` turns it off:
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
        url_name: str = "SOURCES__ESPER__BASE_URL",
    ) -> None:
        self.origin = Origin(base_url, enterprise_id)
        self.key_name = key_name  # where the key came from, named when the API refuses it
        self.url_name = url_name  # where the base URL came from, named when it is wrong
        # Set by the run once its first requests proved the key and the enterprise id
        # (`scan/opening.py`): from then on a 403/404 on a tenant-level route is a missing
        # capability (`EsperUnavailableError`), not a wrong setting.
        self.settings_proven = False
        check_limits(min_concurrency, max_concurrency, max_retries, timeout, backoff_base,
                      backoff_max, max_retry_wait)  # fmt: skip
        self._max_concurrency = max_concurrency
        self._timeout = timeout
        self._guard = Guard()
        self._clock = clock
        self._sleep = sleep if sleep is not None else self._sleep_unless_stopped
        self._rules = Rules(max_retries, backoff_base, backoff_max, max_retry_wait,
                            rng or random.Random())  # fmt: skip
        self._cooldown_lock = threading.Lock()
        self._cooldown_until = 0.0  # monotonic time before which no request is sent
        self._limiter = AdaptiveLimiter(
            min(max(initial_concurrency, min_concurrency), max_concurrency),
            min_concurrency,
            max_concurrency,
        )
        self._pacer = RatePacer(clock, self._limiter) if pace else None
        self._lock = threading.Lock()  # guards the server time
        self._counters = Counters()
        self._server_time: datetime | None = None
        headers = _headers(check_key(api_key))  # the key, from here on only in the pools
        self._pools = Pools(headers, timeout, max_concurrency, self._guard, transport)
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
        yield from map_concurrently(
            fn, items, self._max_concurrency, self._mark_bulk if bulk else None, self.stop
        )

    def map_in_order(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run `fn(item)` for every item on worker threads; yield results in item order.

        For a list read page by page whose pages must come in order: at most twice the current
        limit of requests in flight are started and not yet yielded, so a page that answers late
        holds back the pages after it (a bounded number of them) instead of letting the whole
        rest of the list arrive and wait in memory.
        """
        yield from map_in_order(fn, items, self._max_concurrency, 2 * self.concurrency, self.stop)

    def read_ahead(self, items: Iterator[T]) -> Iterator[T]:
        """Yield from `items` while its next item is already being produced on another thread.

        For a sequential page walk (a cursor list can only be read in order): the next page's
        request is in flight while the caller converts and loads the current one. At most one
        item is read ahead; closing this generator lets the item being read finish, then stops.
        """
        yield from read_one_ahead(items, self.stop)

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
        """Send one logical request: resolve and check the URL, then attempt until
        `policy.decide` says it is done, sleeping every wait it asks for.

        Raises:
            EsperError: What `decide` gave up with (see the module).
        """
        url = self.origin.resolve(path_or_url)
        route = f"{method} {self.origin.template(url.path)}"
        tries = Tries()
        while True:
            slept = self._wait_cooldown(self._rules.max_wait - tries.waited)
            if slept:
                tries = replace(tries, waited=tries.waited + slept)
            decision = self._attempt(method, url, route, params, body, tries, retry)
            if decision.then == "return":
                return decision.value
            if decision.then == "raise":
                if decision.why:
                    log.log(decision.level, "%s", decision.why)
                assert decision.error is not None
                raise decision.error
            log.log(decision.level, "%s (concurrency %d)", decision.why, self.concurrency)
            self._counters.count(route, retries=1)
            if decision.holds_all:  # slept by every request before its next attempt
                self._hold_until(self._clock() + decision.wait)
            else:
                self._sleep(decision.wait)
            tries = decision.tries

    def _attempt(
        self,
        method: str,
        url: httpx.URL,
        route: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
        tries: Tries,
        retry: bool,
    ) -> Decision:
        """Make one attempt under a limiter slot, at its pace: what `policy.decide` says of it."""
        self._check_stopped(route)
        epoch = self._limiter.acquire(urgent=not getattr(self._thread, "bulk", False))
        started = time.monotonic()
        stats = RouteStats()
        learnt = "neutral"  # what the limiter learns: "healthy", "throttled" or "neutral"
        try:
            reserved_at = self._wait_for_pace(route)
            self._check_stopped(route)
            stats.requests = 1
            answer = self._send(method, url, route, params, body)
            if isinstance(answer, httpx.Response):
                stats.bytes = answer.num_bytes_downloaded or len(answer.content)
                self._note_date(answer, started)
                log.debug("%s -> %s (%d bytes)", route, answer.status_code, stats.bytes)
            facts = Facts(self.origin, self.key_name, self.settings_proven, redact, self.url_name)
            decision = decide(route, answer, tries, rules=self._rules, facts=facts,
                              pacer=self._pacer, reserved_at=reserved_at, retry=retry)  # fmt: skip
            learnt = decision.limiter
            stats.throttled = int(decision.status == 429)
            stats.errors = int(decision.then != "return" and decision.status != 429)
            return decision
        finally:
            stats.seconds = time.monotonic() - started
            self._limiter.release(epoch, learnt)
            if stats.requests:
                self._counters.count(route, **vars(stats))

    def _hold_until(self, until: float) -> None:
        """Hold every request of the client until `until` (monotonic): a shared Retry-After."""
        with self._cooldown_lock:
            self._cooldown_until = max(self._cooldown_until, until)

    def _wait_cooldown(self, budget: float) -> float:
        """Sleep until the shared Retry-After cooldown, at most `budget` s; the seconds slept."""
        with self._cooldown_lock:
            remaining = self._cooldown_until - self._clock()
        wait = min(remaining, max(budget, 0.0))
        if wait <= 0:
            return 0.0
        self._sleep(wait)
        return wait

    def _wait_for_pace(self, route: str) -> float:
        """Wait for this request's pace slot (the rate learnt from 429s); when it was reserved.

        Paced last, with the limiter's slot taken: the request goes out when its pace slot is
        due, never later behind other waits (a late burst is what the pacer prevents).
        """
        reserved_at = self._clock()
        pace = self._pacer.reserve() if self._pacer else 0.0
        while self._pacer is not None and pace > 0:
            self._sleep(pace)
            self._check_stopped(route)
            # A cut while this request waited re-spaces it at the new pace.
            now = self._clock()
            again = self._pacer.respace(reserved_at, reserved_at + pace)
            reserved_at, pace = (now, again) if again is not None else (reserved_at, 0.0)
        return reserved_at

    def _send(
        self,
        method: str,
        url: httpx.URL,
        route: str,
        params: Mapping[str, Any] | None,
        body: bytes | None,
    ) -> httpx.Response | Exception:
        """Send the attempt within its deadline: the answer, or what was raised instead."""
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
            return exc
        finally:
            self._guard.end()

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

    def redact(self, text: str) -> str:
        """`errors.redact`: every API key of the process taken out of `text`, in any case or form."""
        return redact(text)


def _headers(key: str) -> dict[str, str]:
    """The headers of every request: the key as a bearer token (handed to the pools, kept only
    there), JSON answers, gzip."""
    return {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "Accept-Encoding": "gzip",
        "User-Agent": "esper-warehouse (httpx)",
    }


def check_limits(
    min_concurrency: int,
    max_concurrency: int,
    max_retries: int,
    timeout: float,
    backoff_base: float,
    backoff_max: float,
    max_retry_wait: float,
) -> None:
    """Refuse inconsistent limits before anything is built.

    Raises:
        EsperConfigError: Naming the limit that is wrong.
    """
    if not 1 <= min_concurrency <= max_concurrency:
        raise EsperConfigError(
            f"concurrency bounds must satisfy 1 <= min ({min_concurrency}) <= max "
            f"({max_concurrency})"
        )
    if max_retries < 0 or timeout <= 0 or backoff_base < 0 or backoff_max < 0:
        raise EsperConfigError("timeout must be > 0; max_retries and backoff must be >= 0")
    if not max_retry_wait >= 0:  # NaN too
        raise EsperConfigError(f"max_retry_wait must be >= 0 seconds, not {max_retry_wait}")
