"""Reading an answer: the API's own error text, `Retry-After`, and the server's `Date`."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx
import orjson

MESSAGE_CHARS = 300  # of an error body's message, as quoted in errors and logs
SNIPPET_CHARS = 60  # of a body that is not JSON


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
