"""API timestamps: ISO 8601 text (or epoch numbers) to aware datetimes and back.

The one home of how an API time is read: the loader's typed columns (`arrow.py`), the cursors and
the run's bookkeeping all read times through `parse_time`.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

# A US date (month first), as Apple's and Esper's consoles write one, with an optional time (UTC):
# `10/02/2026` is 2 October 2026.
_US_DATE = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?")
# An epoch number has at least 9 digits (1973-03-03 onwards as seconds): fewer would be a time
# before any device, token or certificate, and 8 digits are ISO 8601's basic date (`20260210`).
EPOCH_FROM = 1e8
# Epoch numbers at or above this are milliseconds: as seconds it is the year 5138, as
# milliseconds 1973-03-03.
EPOCH_MS_FROM = 1e11
_EPOCH_TEXT = re.compile(r"-?\d{9,}(\.\d+)?")


class NotATime(ValueError):
    """A value `parse_time` cannot read; `reason` says why without repeating the value."""

    def __init__(self, value: Any, reason: str) -> None:
        super().__init__(f"{value!r} is not a time ({reason})")
        self.value, self.reason = value, reason


def parse_time(value: Any) -> datetime | None:
    """An API time as an aware datetime; None when absent (None or empty text).

    Read: ISO 8601 text (`Z`, an offset, or none = UTC; a date alone is its midnight), and epoch
    seconds or milliseconds, as numbers or as text of digits (`EPOCH_MS_FROM` tells them apart).

    Raises:
        NotATime: (a ValueError) the value is not a time, or one no tool can show (outside the
            years 1-9999, such as `0000-00-00T00:00:00Z` or the year 275760); the message quotes
            the value.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise NotATime(value, f"a {type(value).__name__}")
    if isinstance(value, int | float):
        return _epoch(value, value)
    text = value.strip()
    if _EPOCH_TEXT.fullmatch(text):
        return _epoch(float(text), value)
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        words = str(error)  # Python's own: "year 0 is out of range", "Invalid isoformat string"
        raise NotATime(value, "not ISO 8601" if "isoformat" in words else words) from None
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    try:
        return ts.astimezone(UTC)
    except OverflowError:  # an offset that moves the first or last day out of range
        raise NotATime(value, "outside the years 1-9999") from None


def cursor_time(value: Any, name: str) -> datetime | None:
    """A list's cursor value (field `name`) as a time; None when absent.

    Raises:
        NotATime: naming the cursor, which is never read as NULL (the run ends, exit 3).
    """
    try:
        return parse_time(value)
    except NotATime as error:
        reason = f"{error.reason}; {name} is the list's cursor, never read as NULL"
        raise NotATime(value, reason) from None


def _epoch(number: float, value: Any) -> datetime:
    if not math.isfinite(number):
        raise NotATime(value, "not a finite number")
    if abs(number) < EPOCH_FROM:
        raise NotATime(value, "a number of fewer than 9 digits is no epoch time")
    seconds = number / 1000 if abs(number) >= EPOCH_MS_FROM else number
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise NotATime(value, "an epoch number outside the years 1-9999") from None


def iso(ts: datetime) -> str:
    """A datetime as the API writes it (UTC, `Z`)."""
    return ts.isoformat().replace("+00:00", "Z")


def us_date(value: Any) -> Any:
    """A US date text (`MM/DD/YYYY`, optionally with ` HH:MM[:SS]`, UTC) as ISO 8601 text; any
    other value unchanged, for `parse_time` to read or call unreadable.

    For fields whose format the API does not declare (a DEP token's `meta.token_expiry_on`) and
    the credentials' expiries, used as a column's `convert`. An impossible date (`25/02/2026`:
    no month 25) is returned unchanged, and so is unreadable.
    """
    if not isinstance(value, str):
        return value
    match = _US_DATE.fullmatch(value.strip())
    if match is None:
        return value
    month, day, year, hour, minute, second = (int(g) if g else 0 for g in match.groups())
    try:
        return iso(datetime(year, month, day, hour, minute, second, tzinfo=UTC))
    except ValueError:
        return value
