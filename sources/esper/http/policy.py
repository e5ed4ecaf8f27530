"""What follows an answer: `decide(...) -> Decision`, the one place a retry or throttle is decided.

Every attempt's answer (an HTTP response, or the exception that came instead) goes to `decide`,
which returns what the client does next as a value (`Decision`): return the body, raise an error,
or retry after a wait that holds this request alone or every request of the client, and why.
`decide` takes what it must know as values (the key's `redact`, whether the run has proven its
settings, the origin, the request's tries so far, the retry rules); it never calls the client.
The client sleeps what it is told (`EsperClient._request`).

An attempt ends in one of three ways:

* a value: a 2xx answer with a JSON body (or none);
* a retry: a 429; a 500/502/503/504; a timeout, a dropped connection; a 2xx whose body is not
  JSON;
* a final error (`final_error`), never retried: 401/403, 404, 3xx, another 4xx. What it says
  depends on what the run has proven: before the key and the enterprise id are proven, the key
  or the enterprise id is named; after, a 403 or a tenant-level 404 is a missing capability.

What follows a retry:

* 500/502/503/504, timeouts, dropped connections and bodies that are not JSON are retried
  `max_retries` times with exponential backoff and full jitter.
* A 429 costs no retry (the wait budget bounds it) and honours `Retry-After` (seconds, or an
  HTTP date read against the answer's own `Date`), else backs off. When the 429 cut the pace
  (`pacing.RatePacer.cuts_pace`: the API's bucket is empty) its `Retry-After` holds every
  request of the client (a shared cooldown); when it did not (the tenant's weather, the same
  overshoot again) it holds that request alone.
* A request waits at most `max_wait` seconds between its attempts altogether: a longer
  `Retry-After` fails it at once, quoting the server (docs/decisions.md, "Bounded requests").

A 429 from the socket to the sleep crosses three rooms: `http/client.py` (`EsperClient._attempt`:
a limiter slot, the pace slot, `_send`) → `http/policy.py` (`decide`, which asks the pacer) →
the pacer, `http/pacing.py` (`RatePacer.cuts_pace`: did it cut the pace; its evidence in
`http/weather.py`) → back in `http/policy.py` (`Decision`: how long, who waits, why) →
`http/client.py` (`_attempt` hands `Decision.limiter` to `limiter.AdaptiveLimiter.release`; `_request` logs `why` and sleeps `wait`, or holds every
request until it is over).

Every text taken from an answer is clipped for people with the key taken out first (`clip`).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

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
from .origin import Origin, location_origin, name_lookup_error, tls_setting_error
from .pacing import RatePacer

RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
# A 429 costs no retry (the wait budget bounds it); this many 429s in a row end a request anyway
# (a server answering 429 with `Retry-After: 0` would otherwise be asked for ever).
MAX_THROTTLED = 100
MESSAGE_CHARS = 300  # of an error body's message, as quoted in errors and logs
SNIPPET_CHARS = 60  # of a body that is not JSON
ROUTINE_WAIT_S = 5.0  # a Retry-After up to this long for one request alone is logged at debug


@dataclass(frozen=True)
class Rules:
    """How a client retries (set once, when it is built).

    Attributes:
        max_retries: Retries per request after the first attempt (429s excepted).
        backoff_base: First backoff cap in seconds; the cap doubles per retry (full jitter).
        backoff_max: Largest backoff cap in seconds.
        max_wait: Seconds one request may wait between its attempts, in total.
        rng: Source of jitter.
    """

    max_retries: int
    backoff_base: float
    backoff_max: float
    max_wait: float
    rng: random.Random


@dataclass(frozen=True)
class Facts:
    """What a decision must know of the client and the run, as values.

    Attributes:
        origin: Where the requests go (base URL, enterprise id, which routes are tenant-level).
        key_name: Where the key came from, named when the API refuses it.
        url_name: Where the base URL came from, named when its host or TLS is wrong.
        settings_proven: The run's first requests proved the key and the enterprise id: a 403 or
            a tenant-level 404 is a missing capability from then on, not a wrong setting.
        redact: Takes every API key out of a text (`errors.redact`).
    """

    origin: Origin
    key_name: str
    settings_proven: bool
    redact: Callable[[str], str]
    url_name: str = "SOURCES__ESPER__BASE_URL"


@dataclass(frozen=True)
class Tries:
    """What one request has spent so far."""

    retries: int = 0  # of `max_retries` (a 429 spends none)
    throttled: int = 0  # 429s answered
    waited: float = 0.0  # seconds waited between attempts, of `max_wait`


@dataclass(frozen=True)
class Decision:
    """What the client does after one attempt (`decide`).

    Attributes:
        then: ``"return"`` the value, ``"raise"`` the error, or ``"retry"`` after `wait`.
        value: The answer's parsed body (``"return"``).
        error: What ends the request (``"raise"``).
        wait: Seconds before the next attempt (``"retry"``).
        holds_all: The wait holds every request of the client (a `Retry-After` from an empty
            bucket: a shared cooldown); else this request alone.
        why: For people: the log line of a retry, or the text of a request given up.
        level: The log level of `why` (`logging.NOTSET`: not logged).
        tries: The request's tries after this attempt.
        limiter: What the limit of requests in flight learns (`limiter.AdaptiveLimiter.release`):
            ``"healthy"``, ``"throttled"`` (halve) or ``"neutral"``.
        status: The answer's HTTP status; None when no answer came.
    """

    then: Literal["return", "retry", "raise"]
    value: Any = None
    error: BaseException | None = None
    wait: float = 0.0
    holds_all: bool = False
    why: str = ""
    level: int = logging.NOTSET
    tries: Tries = Tries()
    limiter: Literal["healthy", "throttled", "neutral"] = "neutral"
    status: int | None = None


@dataclass(frozen=True)
class _Failure:
    """A failed attempt that may be repeated."""

    reason: str  # for logs and the final error: "HTTP 503", "timeout (ReadTimeout)", ...
    status: int | None
    wait: float | None = None  # a server-imposed wait (Retry-After); None: use backoff
    retry_after: str | None = None  # the Retry-After header as the server wrote it
    malformed: bool = False
    # A 429 that cut the pace (the API's bucket is empty): its Retry-After holds every request
    # of the client. Any other 429 (the tenant's weather, the same overshoot) holds only its own.
    holds_all: bool = True


# ------------------------------------------------------------------------ the one decision


def decide(
    route: str,
    answer: httpx.Response | Exception,
    tries: Tries,
    *,
    rules: Rules,
    facts: Facts,
    pacer: RatePacer | None,
    reserved_at: float,
    retry: bool = True,
) -> Decision:
    """What to do after an attempt: return its value, raise, or retry after a wait.

    Args:
        route: The route template, for messages.
        answer: The answer, or the exception raised instead of one (`httpx` transport errors).
        tries: What the request spent before this attempt.
        rules: The client's retry rules.
        facts: What messages depend on (the origin, the key's name, proven settings, redact).
        pacer: The client's pacer (None: not paced). Every answer is reported to it; a 429 that
            did not cut the pace (the tenant's weather, the same overshoot) holds only its own
            request, and the limit of requests in flight stays.
        reserved_at: When the request took its pace slot (the pacer's clock).
        retry: False: one attempt only (a Data Tap submission or poll).

    Returns:
        The decision; for an exception that is not the network's, ``"raise"`` it unchanged.
    """
    if isinstance(answer, Exception):
        failure = failed_attempt(answer, facts)
        if isinstance(failure, BaseException):
            return Decision("raise", error=failure)
        return _follow(route, failure, tries, rules, retry)
    status = answer.status_code
    throttled = status == 429
    refused_before = tries.throttled > 0  # a retry: paced as first attempts are
    cut = (
        pacer.cuts_pace(throttled, reserved_at, retried=refused_before)
        if pacer is not None
        else throttled
    )
    if throttled:
        failure = _Failure(
            reason=f"HTTP 429 (throttled){api_message(answer, facts.redact)}",
            status=429,
            wait=retry_after(answer),
            retry_after=answer.headers.get("retry-after", "").strip() or None,
            holds_all=cut,
        )
        limiter = "throttled" if cut else "neutral"
        return replace(_follow(route, failure, tries, rules, retry), limiter=limiter, status=429)
    if status in RETRYABLE_STATUSES:
        failure = _Failure(f"HTTP {status}{api_message(answer, facts.redact)}", status)
        return replace(_follow(route, failure, tries, rules, retry), status=status)
    if 200 <= status < 300:
        if status == 204 or not answer.content:
            return Decision("return", limiter="healthy", status=status)
        try:
            value = orjson.loads(answer.content)
        except orjson.JSONDecodeError:
            failure = _Failure(
                reason=f"HTTP {status} with a body that is not valid JSON "
                f"({len(answer.content)} bytes: {_snippet(answer, facts.redact)!r})",
                status=status,
                malformed=True,
            )
            return replace(_follow(route, failure, tries, rules, retry), status=status)
        return Decision("return", value=value, limiter="healthy", status=status)
    # the server is fine; the request not
    error = final_error(route, answer, facts)
    return Decision("raise", error=error, limiter="healthy", status=status)


def _follow(route: str, failure: _Failure, tries: Tries, rules: Rules, retry: bool) -> Decision:
    """What follows a failed attempt: a wait (shared cooldown, its own `Retry-After`, jittered
    backoff) within the request's wait budget, or giving up."""
    retries, throttled = tries.retries, tries.throttled
    if not retry:
        return _give_up(route, failure, attempts=1, tries=tries)
    if failure.status == 429 and throttled < MAX_THROTTLED:
        # Under a rate limit many requests wait out the same window and race for it again:
        # losing that race is not a failure (docs/decisions.md, "A 429 costs no retry"). The
        # wait budget still bounds the request.
        throttled += 1
    elif retries >= rules.max_retries:
        return _give_up(route, failure, attempts=retries + throttled + 1, tries=tries)
    else:
        retries += 1
    budget = rules.max_wait - tries.waited
    said = (
        f"429 number {throttled}"
        if failure.status == 429
        else f"retry {retries}/{rules.max_retries}"
    )
    # A 429 that waits for itself alone (the tenant's weather) is routine: debug, not warning;
    # unless the API asks for a wait a person would notice.
    long_wait = failure.wait is not None and failure.wait > ROUTINE_WAIT_S
    level = logging.WARNING if failure.holds_all or long_wait else logging.DEBUG
    if failure.wait is not None:
        asked = seconds_text(failure.wait)
        header = failure.retry_after or ""
        quoted = "Retry-After" if header == asked else f"Retry-After: {header}"
        if failure.wait > budget:
            text = (
                f"{route}: the API asked to wait {asked} s ({quoted}) before retrying, more "
                f"than the {seconds_text(max(budget, 0.0))} s left of the "
                f"{seconds_text(rules.max_wait)} s a request may wait "
                "(max_retry_wait_s); the tenant is probably over its API quota: try again "
                "later"
            )
            error = EsperAPIError(text, status=failure.status, route=route)
            return Decision("raise", error=error, why=text, level=logging.ERROR, tries=tries)
        # The server said when to come back: every request of this client waits until then
        # (slept before each one's next attempt, and charged to its budget there), unless the
        # 429 was not this run's doing (then only this request waits).
        waited = tries.waited if failure.holds_all else tries.waited + failure.wait
        return Decision(
            "retry",
            wait=failure.wait,
            holds_all=failure.holds_all,
            why=f"{route}: {failure.reason}; the API asked to wait {asked} s ({quoted}): "
            f"{said} then",
            level=level,
            tries=Tries(retries, throttled, waited),
        )
    # every failed attempt in a row, 429s too, doubles the backoff
    cap = min(rules.backoff_max, rules.backoff_base * 2 ** (retries + throttled - 1))
    delay = min(rules.rng.uniform(0, cap), max(budget, 0.0))
    return Decision(
        "retry",
        wait=delay,
        why=f"{route}: {failure.reason}; {said} in {delay:.2f} s",
        level=level,
        tries=Tries(retries, throttled, tries.waited + delay),
    )


def _give_up(route: str, last: _Failure, attempts: int, tries: Tries) -> Decision:
    """The typed error once the retries of a request are exhausted."""
    text = f"{route} failed after {attempts} attempts; last: {last.reason}"
    kind = EsperResponseError if last.malformed else EsperAPIError
    error = kind(text, status=last.status, route=route)
    return Decision("raise", error=error, why=text, level=logging.ERROR, tries=tries)


# ------------------------------------------------------------------- what an answer means


def failed_attempt(error: Exception, facts: Facts) -> _Failure | Exception:
    """An attempt that got no answer, as a failure to retry; else the error that ends it.

    Returns:
        The failure (a timeout, a dropped connection, an undecodable body), or what to raise:
        `EsperConfigError` for a TLS handshake that is the base URL's fault or a host name DNS
        does not know, `EsperAPIError` when the DNS resolver did not answer (the same on every
        attempt: never retried), and `error` itself when it is not the network's.
    """
    origin = facts.origin.text()
    if isinstance(error, httpx.TimeoutException):
        reason = f"timeout ({type(error).__name__}: {error})"
    elif (refused := tls_setting_error(error, origin, facts.url_name)) is not None:
        return refused
    elif (unknown := name_lookup_error(error, origin, facts.url_name)) is not None:
        return unknown
    elif isinstance(error, httpx.TransportError):
        reason = f"connection failed ({type(error).__name__}: {error})"
    elif isinstance(error, httpx.DecodingError):
        reason = f"undecodable body ({error})"
    else:
        return error
    malformed = isinstance(error, httpx.DecodingError)
    return _Failure(reason=facts.redact(reason), status=None, malformed=malformed)


def final_error(route: str, response: httpx.Response, facts: Facts) -> EsperError:
    """The error for an answer that is never retried (401/403, 404, 3xx, other 4xx).

    What it says depends on what the run has proven: before the key and the enterprise id are
    proven, a 401/403 is the key and a tenant-level 404 the enterprise id or base URL; after,
    a 403 or a tenant-level 404 is a missing capability (`EsperUnavailableError`): a scope, a
    plan feature, a platform. Never a setting that other requests proved right.
    """
    status, origin, redact = response.status_code, facts.origin, facts.redact
    if facts.settings_proven and (
        status == 403 or (status == 404 and origin.is_tenant_level(route))
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
            f"the API key was refused (HTTP {status}) by {origin.text()}: check the "
            f"key ({facts.key_name}) and that it belongs to this tenant",
            status=status,
            route=route,
        )
    message = api_message(response, redact)
    if status == 404:
        if origin.is_tenant_level(route):
            eid = (
                f"the enterprise id ({origin.enterprise_id})"
                if origin.enterprise_id
                else "the enterprise id (none configured)"
            )
            text = (
                f"{route} answered 404 Not Found{message}: {eid} or the base URL "
                f"({origin.base_url}) is probably wrong"
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
        redact(f"{route} answered HTTP {status}{message}"), status=status, route=route
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
