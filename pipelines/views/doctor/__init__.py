"""`esper-warehouse doctor`: a bounded, read-only probe of a tenant's wire shapes.

One small page (``limit`` 3) per route the source reads (docs/guide/real-tenant.md counts them: `table_docs`), every one
through `EsperClient`, so a 429 is honoured and the key stays in the client (Data Tap only with
``--data-tap``, since it runs a query). Hard bounds: ``MAX_REQUESTS`` on the wire (3 per route at
most, a 429 included: the transport refuses a fourth), and no route probed after
``TIME_BUDGET_S``. Each answer's *shape* is compared with a
reference, never a hand-kept copy of the wire:

* the live evidence, `docs/spec/live-shapes.json`, for the routes recorded there;
* else the OpenAPI subset, `docs/spec/esper-openapi-subset.json` (and, for Data Tap, the documented
  shapes in ``live-shapes.json`` ``docs_only``).

What the source *reads* comes from its own declarations: each table's key and cursor and the nested
fields its schema flattens (their `Table` declarations in `sources/esper/tables/`), in snake_case or camelCase,
where the reference has them; plus the envelope keys the paginator reads (``results``, ``count``,
``next``, ``next_cursor``, ``has_more``), and the source's own `parse_page` as a last judge.

Severities: a missing table key or cursor (the only fields a run cannot do without: every
column is nullable), a type change of it (or of an object on its path), an
envelope family other than the reference's, a list the page reader rejects, or a route the source
reads failing after its retries, **breaks** a run (exit 3). A 403/404 after the first two
requests is a route the key cannot read: a run skips that table and the tables read from it (a
partial run), so it is listed as refused with those tables, every other route is still probed,
and doctor ends as the run would: exit 6 (`probes.run_would_skip`; a test runs both). An extra key, a null where a value was seen, a change
anywhere else, or anything on a route the source does not read is a **note**. A refused key or a
wrong enterprise id or base URL is exit 2. See docs/decisions.md, "doctor".

Parts: `probes.py` (the bounds, the client, the sequence of probes), `report.py` (what a route
and the whole probe saw, the human report); the command (its options, the settings read, the
report printed and written) is `commands/doctor.py`. The comparison with the
references is `pipelines/shapes` (`reference`, `check_answer`), shared with the tests.

The report holds no values: route templates (ids replaced by ``{id}``), status codes, envelope
families, JSON types, counts, timings, and key names from an allowlist (`known_keys`: the
references' field names and the source's declared columns); any other key is ``<unknown key>``.
The API key is masked in the printed and written report as a last guard.
"""

from __future__ import annotations

from ...shapes import BREAK, NOTE, SET_ASIDE, UNKNOWN_KEY, Finding, known_keys, safe_key

# The bounds are `probes.py`'s: these names are copies to read (a test patches `probes`).
from .probes import (
    BACKOFF_MAX_S,
    MAX_REQUESTS,
    MAX_RETRIES,
    MAX_RETRY_WAIT_S,
    PROBE_LIMIT,
    REQUEST_TIMEOUT_S,
    TIME_BUDGET_S,
    Doctor,
    check,
    probe,
)
from .report import REFUSED, REFUSED_MEANING, Result, RouteReport, render

__all__ = [
    "BACKOFF_MAX_S",
    "BREAK",
    "MAX_REQUESTS",
    "MAX_RETRIES",
    "MAX_RETRY_WAIT_S",
    "NOTE",
    "PROBE_LIMIT",
    "REFUSED",
    "REFUSED_MEANING",
    "REQUEST_TIMEOUT_S",
    "SET_ASIDE",
    "TIME_BUDGET_S",
    "UNKNOWN_KEY",
    "Doctor",
    "Finding",
    "Result",
    "RouteReport",
    "check",
    "known_keys",
    "probe",
    "render",
    "safe_key",
]
