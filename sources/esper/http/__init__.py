"""Everything that talks HTTP to the Esper API: `EsperClient` and the errors it raises.

Rooms by concern, as dlt's `rest_client` keeps its client, paginators and exceptions apart:

* `client`: `EsperClient` (get, post, map, read_ahead, counters), the connections it sends with
  (pools holding the key, the total deadline of an attempt, `stop()`), its worker threads;
* `policy`: what an answer means and what follows it (a value, a retry, a final error; backoff,
  `Retry-After`, the shared cooldown, the wait budget; what a refusal says);
* `pacing`: the pace (requests in flight: `AdaptiveLimiter`; requests a second, learnt from
  429s: `RatePacer`, its weather judgement's trials in `trials`);
* `pages`: the list envelopes and their walks (`next` links, cursor pages, linkless lists, whole
  lists checked against their count, fan-outs over parents);
* `errors` (the exceptions) and `origin` (where requests may go: base URL, links, route names).

A 429 is followed in `client` (`_attempt`), `pacing` (`RatePacer.answered`,
`AdaptiveLimiter.release`) and `policy` (`classify`, then `RetryPolicy.request`, where its wait
is decided and slept), and `errors` when it ends the request.
"""

from .client import EsperClient, RouteStats
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
