"""Everything that talks HTTP to the Esper API: `EsperClient` and the errors it raises.

One concern per module: `client` (get, post, map, read_ahead, counters), `retry` (backoff,
Retry-After, the shared cooldown, the wait budget), `limiter` (requests in flight), `pacing` (the
rate learnt from 429s), `deadline` (an attempt's total deadline and `stop()`), `origin` (base URL,
links, route templates), `answers` (error texts, Retry-After, Date), `errors`, `stats`; and
how lists are walked: `pages` (envelopes, `next` links, cursor pages, newest-first early
stops) and `reads` (whole lists checked against their count, fan-outs over parents).
"""

from .client import EsperClient
from .errors import (
    EsperAPIError,
    EsperAuthError,
    EsperConfigError,
    EsperError,
    EsperInterrupted,
    EsperNotFoundError,
    EsperResponseError,
    EsperUnavailableError,
)
from .stats import RouteStats

__all__ = [
    "EsperAPIError",
    "EsperAuthError",
    "EsperClient",
    "EsperConfigError",
    "EsperError",
    "EsperInterrupted",
    "EsperNotFoundError",
    "EsperResponseError",
    "EsperUnavailableError",
    "RouteStats",
]
