"""API timestamps: ISO 8601 text to aware datetimes and back, as the API writes them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

# A US date (month first), as Apple's and Esper's consoles write one, with an optional time (UTC):
# `10/02/2026` is 2 October 2026.
_US_DATE = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?")


def parse_time(value: Any) -> datetime | None:
    """An API timestamp (ISO 8601, `Z` or offset) as an aware datetime; None when absent."""
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    ts = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


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
