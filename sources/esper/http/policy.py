"""The policy for an answer: what it means, and what follows it.

An attempt ends in one of three ways (`classify`, `failed_attempt`):

* a value: a 2xx answer with a JSON body (or none);
* a retry: a 429; a 500/502/503/504; a timeout, a dropped connection; a 2xx whose body is not
  JSON;
* a final error (`final_error`), never retried: 401/403, 404, 3xx, another 4xx. What it says
  depends on what the run has proven: before the key and the enterprise id are proven, the key
  or the enterprise id is named; after, a 403 or a tenant-level 404 is a missing capability.

What follows a retry is decided and waited out in one place, `RetryPolicy.request`:

* 500/502/503/504, timeouts, dropped connections and bodies that are not JSON are retried
  `max_retries` times with exponential backoff and full jitter.
* A 429 costs no retry (the wait budget bounds it) and honours `Retry-After` (seconds, or an
  HTTP date read against the answer's own `Date`), else backs off. When the 429 cut the pace
  (`pacing.RatePacer.answered`: the API's bucket is empty) its `Retry-After` holds every request
  of the client (a shared cooldown); when it did not (the tenant's weather, the same overshoot
  again) it holds that request alone.
* A request waits at most `max_wait` seconds between its attempts altogether: a longer
  `Retry-After` fails it at once, quoting the server (docs/decisions.md, "Bounded requests").

Every text taken from an answer is clipped for people with the key taken out first (`clip`).
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from .errors import (
    UNAVAILABLE_MEANING,
    EsperAPIError,
    EsperAuthError,
    EsperError,
    EsperNotFoundError,
    EsperResponseError,
    EsperUnavailableError,
)
from .origin import location_origin, name_lookup_error, tls_setting_error

if TYPE_CHECKING:
    from .client import EsperClient, RouteStats

log = logging.getLogger("esper_warehouse.client")

RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
# A 429 costs no retry (the wait budget bounds it); this many 429s in a row end a request anyway
# (a server answering 429 with `Retry-After: 0` would otherwise be asked for ever).
MAX_THROTTLED = 100
MESSAGE_CHARS = 300  # of an error body's message, as quoted in errors and logs
SNIPPET_CHARS = 60  # of a body that is not JSON


@dataclass
class Retry:
    """A failed attempt that may be repeated."""

    reason: str  # for logs and the final error: "HTTP 503", "timeout (ReadTimeout)", ...
    status: int | None
    wait: float | None = None  # a server-imposed wait (Retry-After); None: use backoff
    retry_after: str | None = None  # the Retry-After header as the server wrote it
    malformed: bool = False
    # A 429 that cut the pace (the API's bucket is empty): its Retry-After holds every request
    # of the client. Any other 429 (the tenant's weather, the same overshoot) holds only its own.
    holds_all: bool = True


@dataclass
class Value:
    """A successful attempt's parsed body."""

    value: Any


# ------------------------------------------------------------------- what an answer means


def classify(
    route: str, response: httpx.Response, stats: RouteStats, *, cut: bool, client: EsperClient
) -> tuple[Value | Retry | EsperError, str]:
    """An answer as a value, a retry or a final error, with what the limiter learns from it.

    Args:
        route: The route template, for messages.
        response: The answer.
        stats: The attempt's counters (`throttled`, `errors` are set here).
        cut: For a 429: whether it cut the pace (`RatePacer.answered`). One that did not is not
            news for the pace: it holds only its own request, and the limit of requests in
            flight stays.
        client: The client that asked (its key is redacted, its proven settings decide what a
            refusal means).

    Returns:
        The outcome, and ``"healthy"``, ``"throttled"`` or ``"neutral"`` for the limiter.
    """
    status = response.status_code
    if status == 429:
        stats.throttled = 1
        return Retry(
            reason=f"HTTP 429 (throttled){api_message(response, client.redact)}",
            status=429,
            wait=retry_after(response),
            retry_after=response.headers.get("retry-after", "").strip() or None,
            holds_all=cut,
        ), "throttled" if cut else "neutral"
    if status in RETRYABLE_STATUSES:
        stats.errors = 1
        reason = f"HTTP {status}{api_message(response, client.redact)}"
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
                f"({len(response.content)} bytes: {_snippet(response, client.redact)!r})",
                status=status,
                malformed=True,
            ), "neutral"
    stats.errors = 1
    return final_error(route, response, client), "healthy"  # the server is fine; the request not


def failed_attempt(error: Exception, origin: str, redact: Callable[[str], str]) -> Retry | None:
    """An attempt that got no answer, as a retry; None for an error that is not the network's.

    Raises:
        EsperConfigError: A TLS handshake that is the base URL's fault, or a host name DNS does
            not know (the same on every attempt: never retried).
        EsperAPIError: The DNS resolver did not answer (it has retried already: never retried).
    """
    if isinstance(error, httpx.TimeoutException):
        reason = f"timeout ({type(error).__name__}: {error})"
    elif (refused := tls_setting_error(error, origin)) is not None:
        raise refused from None
    elif (unknown := name_lookup_error(error, origin)) is not None:
        raise unknown from None
    elif isinstance(error, httpx.TransportError):
        reason = f"connection failed ({type(error).__name__}: {error})"
    elif isinstance(error, httpx.DecodingError):
        reason = f"undecodable body ({error})"
    else:
        return None
    malformed = isinstance(error, httpx.DecodingError)
    return Retry(reason=redact(reason), status=None, malformed=malformed)


def final_error(route: str, response: httpx.Response, client: EsperClient) -> EsperError:
    """The error for an answer that is never retried (401/403, 404, 3xx, other 4xx).

    What it says depends on what the run has proven: before the key and the enterprise id are
    proven, a 401/403 is the key and a tenant-level 404 the enterprise id or base URL; after,
    a 403 or a tenant-level 404 is a missing capability (`EsperUnavailableError`): a scope, a
    plan feature, a platform. Never a setting that other requests proved right.
    """
    status = response.status_code
    if client.settings_proven and (
        status == 403 or (status == 404 and client.origin.is_tenant_level(route))
    ):
        return EsperUnavailableError(
            f"{route} answered {status} ({UNAVAILABLE_MEANING[status]})",
            table="",  # the resource that asked names its table (common.skip_unavailable)
            reason=UNAVAILABLE_MEANING[status],
            status=status,
            route=route,
        )
    if status in (401, 403):
        return EsperAuthError(
            f"the API key was refused (HTTP {status}) by {client.origin.text()}: check the "
            f"key ({client.key_name}) and that it belongs to this tenant",
            status=status,
            route=route,
        )
    message = api_message(response, client.redact)
    if status == 404:
        if client.origin.is_tenant_level(route):
            eid = (
                f"the enterprise id ({client.enterprise_id})"
                if client.enterprise_id
                else "the enterprise id (none configured)"
            )
            text = (
                f"{route} answered 404 Not Found{message}: {eid} or the base URL "
                f"({client.base_url}) is probably wrong"
            )
            return EsperNotFoundError(text, route=route, tenant_level=True)
        return EsperNotFoundError(
            f"{route} answered 404 Not Found{message} (the record may have been removed)",
            route=route,
        )
    if 300 <= status < 400:
        where = location_origin(response.headers.get("location", ""))
        return EsperAPIError(
            f"{route} answered an unexpected redirect (HTTP {status}) to {where}; "
            "redirects are not followed (check the base URL)",
            status=status,
            route=route,
        )
    return EsperAPIError(
        client.redact(f"{route} answered HTTP {status}{message}"), status=status, route=route
    )


# ---------------------------------------------------------------------- what follows a retry


class RetryPolicy:
    """When a failed attempt is repeated and how long a request waits; shared by the threads of
    one client.

    Args:
        max_retries: Retries per request after the first attempt (429s excepted).
        backoff_base: First backoff cap in seconds; the cap doubles per retry (full jitter).
        backoff_max: Largest backoff cap in seconds.
        max_wait: Seconds one request may wait between its attempts, in total.
        sleep: How to wait (the client's: ends at once when it is stopped).
        clock: Monotonic seconds.
        rng: Source of jitter.
        concurrency: The client's current limit of requests in flight, for the log lines.
        count_retry: Counts one retry of a route (the client's counters).
    """

    def __init__(
        self,
        *,
        max_retries: int,
        backoff_base: float,
        backoff_max: float,
        max_wait: float,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        rng: random.Random,
        concurrency: Callable[[], int],
        count_retry: Callable[[str], None],
    ) -> None:
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_wait = max_wait
        self.sleep = sleep
        self.clock = clock
        self.rng = rng
        self._concurrency = concurrency
        self._count_retry = count_retry
        self._lock = threading.Lock()
        self._cooldown_until = 0.0  # monotonic time before which no request is sent

    def request(
        self, route: str, attempt: Callable[[], Value | Retry], *, retry: bool = True
    ) -> Any:
        """One logical request: `attempt()` until it gives a value, waiting as each failure asks.

        Args:
            route: The route template, for logs and errors.
            attempt: One attempt (`EsperClient._attempt`): a value, a retry, or it raises.
            retry: False: one attempt only (a Data Tap submission or poll).

        Returns:
            The value of the attempt that succeeded.

        Raises:
            EsperAPIError, EsperResponseError: Retries exhausted, or the API asked for a longer
                wait than the request has left.
        """
        retries = 0
        throttled = 0  # 429 answers: throttling, not failure; bounded by the wait budget
        waited = 0.0  # seconds this request spent waiting, bounded by max_wait
        while True:
            waited += self._wait_cooldown(self.max_wait - waited)
            outcome = attempt()
            if not isinstance(outcome, Retry):
                return outcome.value
            if not retry:
                self._give_up(route, outcome, attempts=1)
            if outcome.status == 429 and throttled < MAX_THROTTLED:
                # Under a rate limit many requests wait out the same window and race for it
                # again: losing that race is not a failure (docs/decisions.md, "A 429
                # costs no retry"). The wait budget still bounds the request.
                throttled += 1
            elif retries >= self.max_retries:
                self._give_up(route, outcome, attempts=retries + throttled + 1)
            else:
                retries += 1
            self._count_retry(route)
            budget = self.max_wait - waited
            waited += self._wait_before_retry(route, outcome, retries, throttled, budget)

    def hold_until(self, until: float) -> None:
        """Hold every request of the client until `until` (monotonic): a Retry-After."""
        with self._lock:
            self._cooldown_until = max(self._cooldown_until, until)

    def _wait_cooldown(self, budget: float) -> float:
        """Sleep until the shared Retry-After cooldown, at most `budget` s; the seconds slept."""
        with self._lock:
            remaining = self._cooldown_until - self.clock()
        wait = min(remaining, max(budget, 0.0))
        if wait <= 0:
            return 0.0
        self.sleep(wait)
        return wait

    def _give_up(self, route: str, last: Retry, attempts: int) -> None:
        """Raise the typed error once the retries of a request are exhausted."""
        text = f"{route} failed after {attempts} attempts; last: {last.reason}"
        log.error("%s", text)
        if last.malformed:
            raise EsperResponseError(text, status=last.status, route=route)
        raise EsperAPIError(text, status=last.status, route=route)

    def _wait_before_retry(
        self, route: str, failure: Retry, retries: int, throttled: int, budget: float
    ) -> float:
        """Log the retry and wait: a shared cooldown for Retry-After, else jittered backoff.

        Args:
            retries: Retries spent so far, of `max_retries` (a 429 spends none).
            throttled: 429s answered so far (they cost no retry).
            budget: Seconds this request may still wait (what is left of `max_wait`).

        Returns:
            The seconds waited here (a Retry-After that holds every request is slept by
            `_wait_cooldown` before the next attempt: 0).

        Raises:
            EsperAPIError: The API asked (Retry-After) for a longer wait than `budget`.
        """
        said = self._attempt_text(failure, retries, throttled)
        if failure.wait is not None:
            self._hold_for_retry_after(route, failure, said, budget)
            if failure.holds_all:
                return 0.0
            self.sleep(failure.wait)
            return failure.wait
        # every failed attempt in a row, 429s too, doubles the backoff
        cap = min(self.backoff_max, self.backoff_base * 2 ** (retries + throttled - 1))
        delay = min(self.rng.uniform(0, cap), max(budget, 0.0))
        (log.warning if failure.holds_all else log.debug)(
            "%s: %s; %s in %.2f s (concurrency %d)",
            route,
            failure.reason,
            said,
            delay,
            self._concurrency(),
        )
        self.sleep(delay)
        return delay

    def _attempt_text(self, failure: Retry, retries: int, throttled: int) -> str:
        """`retry 2/8` (of the retry budget), or for a 429 (which costs none) `429 number 12`."""
        if failure.status == 429:
            return f"429 number {throttled}"
        return f"retry {retries}/{self.max_retries}"

    def _hold_for_retry_after(self, route: str, failure: Retry, said: str, budget: float) -> None:
        assert failure.wait is not None
        asked = seconds_text(failure.wait)
        header = failure.retry_after or ""
        quoted = "Retry-After" if header == asked else f"Retry-After: {header}"
        if failure.wait > budget:
            text = (
                f"{route}: the API asked to wait {asked} s ({quoted}) before retrying, more "
                f"than the {seconds_text(max(budget, 0.0))} s left of the "
                f"{seconds_text(self.max_wait)} s a request may wait "
                "(max_retry_wait_s); the tenant is probably over its API quota: try again "
                "later"
            )
            log.error("%s", text)
            raise EsperAPIError(text, status=failure.status, route=route)
        # The server said when to come back: hold every request of this client until then,
        # unless the 429 was not this run's doing (then only this request waits).
        if failure.holds_all:
            self.hold_until(self.clock() + failure.wait)
        # A 429 that waits for itself alone (the tenant's weather) is routine: debug, not warning.
        (log.warning if failure.holds_all else log.debug)(
            "%s: %s; the API asked to wait %s s (%s): %s then (concurrency %d)",
            route,
            failure.reason,
            asked,
            quoted,
            said,
            self._concurrency(),
        )


# ------------------------------------------------------------------------ reading an answer


def clip(text: str, limit: int, redact: Callable[[str], str]) -> str:
    """A server's text shortened to `limit` characters for people, the key taken out FIRST.

    Cut first, a key straddling the cut loses its end and no longer matches `redact`: 36 to 39
    of its 40 characters reached the logs, the errors and the run record. Every text from the
    server that is shortened goes through here.
    """
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def api_message(response: httpx.Response, redact: Callable[[str], str]) -> str:
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
    text = clip("; ".join(parts), MESSAGE_CHARS, redact)
    return f": {text}" if text else ""


def retry_after(response: httpx.Response) -> float | None:
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
        now = parse_date(response.headers.get("date")) or datetime.now(UTC)
        if target.tzinfo is None:
            target = target.replace(tzinfo=UTC)
        seconds = (target - now).total_seconds()
    if math.isnan(seconds):
        return None
    return max(seconds, 0.0)


def parse_date(value: str | None) -> datetime | None:
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


def seconds_text(seconds: float) -> str:
    """Seconds as a person writes them: ``86400``, ``1.5``."""
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:.1f}"


def _snippet(response: httpx.Response, redact: Callable[[str], str]) -> str:
    # the first 4 KB, redacted whole, then cut: a key straddling the cut is still found
    text = response.content[:4096].decode("utf-8", "replace")
    return clip(text, SNIPPET_CHARS, redact)
