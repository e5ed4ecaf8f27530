"""Request context, errors and pagination helpers shared by the routes."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from esper_warehouse.simulator.timeutil import parse_iso

MAX_LIMIT = 1000
UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)

LEGACY, V2, REPORTS = "legacy", "v2", "reports"
REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class ApiError(Exception):
    """An error answered with the route family's error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(family: str, status: int, message: str) -> dict[str, Any]:
    """The error body of a route family (legacy, v0/v2/commands, Reports/Data Tap)."""
    if family == LEGACY:
        # live §11: `"message": "detail: Not found. "`, each error followed by a space
        return {"errors": [message], "message": f"{message} ", "status": status}
    if family == REPORTS:
        return {"status": status, "error": REASONS.get(status, "Error"), "message": message}
    return {"code": status, "message": message, "content": {}}


@dataclass(slots=True)
class Req:
    """What a route handler sees of a request."""

    method: str
    path: str  # full path, e.g. /api/v2/devices/
    query: dict[str, str]
    params: dict[str, str]
    origin: str  # scheme://host[:port]
    body: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)

    def int_param(self, name: str, default: int, minimum: int = 0) -> int:
        """An integer query parameter (400 when not an integer or below ``minimum``)."""
        raw = self.query.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(float(raw)) if "." in raw else int(raw)
        except ValueError:
            raise ApiError(400, f"{name}: a valid integer is required") from None
        if value < minimum:
            raise ApiError(400, f"{name}: must be >= {minimum}")
        return value

    def bool_param(self, name: str) -> bool | None:
        """A boolean query parameter (true/false/1/0; 400 otherwise)."""
        raw = self.query.get(name)
        if raw is None or raw == "":
            return None
        low = raw.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise ApiError(400, f"{name}: must be true or false")

    def time_param(self, name: str) -> int | None:
        """A date-time query parameter as epoch seconds (400 when unparseable)."""
        raw = self.query.get(name)
        if raw is None or raw == "":
            return None
        try:
            return parse_iso(raw)
        except ValueError:
            raise ApiError(400, f"{name}: invalid date-time {raw!r}") from None

    def csv_param(self, name: str) -> list[str] | None:
        """A comma-separated list parameter."""
        raw = self.query.get(name)
        if raw is None or raw.strip() == "":
            return None
        return [v.strip() for v in raw.split(",") if v.strip()]

    def page(self, default_limit: int = 20) -> tuple[int, int]:
        """(offset, limit) with limit clamped silently to 1000; 0 means the default."""
        limit = self.int_param("limit", default_limit) or default_limit
        return self.int_param("offset", 0), min(limit, MAX_LIMIT)

    def url_with(self, **changes: int | None) -> str:
        """This request's absolute URL with query parameters changed (None removes one)."""
        q = dict(self.query)
        for k, v in changes.items():
            if v is None:
                q.pop(k, None)
            else:
                q[k] = str(v)
        return f"{self.origin}{self.path}?{urlencode(q)}" if q else f"{self.origin}{self.path}"


def page_links(req: Req, offset: int, limit: int, total: int) -> tuple[str | None, str | None]:
    """Absolute (next, previous) URLs of an offset page, None at either end."""
    nxt = req.url_with(limit=limit, offset=offset + limit) if offset + limit < total else None
    prev = None
    if offset > 0:
        p = max(0, offset - limit)
        prev = req.url_with(limit=limit, offset=p if p else None)
    return nxt, prev


def check_uuid(value: str, name: str) -> str:
    """400 unless ``value`` is a UUID."""
    if not UUID_RE.match(value):
        raise ApiError(400, f"{name}: {value!r} is not a valid UUID")
    return str(uuid.UUID(value))
