"""Everything that talks HTTP to the Esper API: `EsperClient` and the errors it raises.

Rooms by concern, as dlt's `rest_client` keeps its client, paginators and exceptions apart:

* `client`: `EsperClient` (get, post, map, read_ahead, counters, `stop()`): auth, retries, the
  pace; what it sends with beside it: `transport` (the connection pools holding the key, the
  total deadline of an attempt, an httpx transport of its own), `workers` (the threads of `map`
  and `read_ahead`) and `counters` (`RouteStats`);
* `policy`: what an answer means and what follows it, as a value: `decide(...) -> Decision` (a
  value, a retry, a final error; backoff, `Retry-After`, whether it holds every request, the
  wait budget; what a refusal says), given the facts it needs (`redact`, proven settings);
* the pace, in three modules: `pacing` (requests a second, learnt from 429s: `RatePacer`),
  `weather` (its weather judgement's evidence and rules: `Trial`, `FirstRefusals`,
  `RetriedAnswers`) and `limiter` (requests in flight: `AdaptiveLimiter`);
* `paginators`: the list envelopes (`parse_page`) and how a list pages, declared per table
  (`Table.paginator`) in the shape of dlt's paginators: `LinkPaginator`, `CursorPaginator`,
  `OffsetPaginator`, `SinglePage`;
* `pages`: the walks a paginator drives, whole lists checked against their count, fan-outs over
  parents;
* `errors` (the exceptions) and `origin` (where requests may go: base URL, links, route names).

A 429 crosses three rooms: `client` (`_attempt` sends) → `policy` (`decide`) → the pace
(`RatePacer.cuts_pace`; `AdaptiveLimiter.release`) → `client` (`_request` sleeps the decision's
wait, or holds every request until it is over). The path step by step: `policy`'s docstring.
"""

from .client import EsperClient
from .counters import RouteStats
from .errors import (
    EsperAPIError,
    EsperAuthError,
    EsperConfigError,
    EsperError,
    EsperInterrupted,
    EsperNotFoundError,
    EsperResponseError,
    EsperUnavailableError,
    redact,
)

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
    "redact",
]
