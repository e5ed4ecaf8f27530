"""API timestamps: ISO 8601 text to aware datetimes and back, as the API writes them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


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
