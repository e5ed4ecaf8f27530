"""Simulated-time helpers: integer epoch seconds in, wire strings out (cached)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

_ISO_CACHE: dict[int, str] = {}


def iso(ts: int) -> str:
    """Format epoch seconds as the API does: ``2026-10-01T00:00:00Z``."""
    s = _ISO_CACHE.get(ts)
    if s is None:
        s = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if len(_ISO_CACHE) > 2_000_000:
            _ISO_CACHE.clear()
        _ISO_CACHE[ts] = s
    return s


def iso_or_none(ts: int) -> str | None:
    """Like :func:`iso` but ``None`` for a negative (unset) time."""
    return None if ts < 0 else iso(ts)


def parse_iso(text: str) -> int:
    """Parse an ISO 8601 date-time (``Z`` or offset; naive means UTC) to epoch seconds.

    Raises:
        ValueError: when the text is not a date-time.
    """
    t = text.strip().replace(" ", "+") if "T" in text else text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp())


def to_datetime(ts: int) -> datetime:
    """Epoch seconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)


def http_date(ts: int) -> str:
    """RFC 7231 HTTP-date of epoch seconds, e.g. ``Thu, 01 Oct 2026 00:00:00 GMT``."""
    return format_datetime(datetime.fromtimestamp(ts, UTC), usegmt=True)
