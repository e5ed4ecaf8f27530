"""Records set aside in one run: served without their table's key, cursor or parent key.

Such a record cannot be merged (it has no identity), cannot move a watermark and cannot name its
children's routes, so it is never loaded, keyed `(None,)` or merged with another: it is set
aside (the dead-letter rule of Kafka Connect and Airbyte), counted per `table.column` and route,
and kept for the admin in `_esper_rejected` (`pipelines/bookkeeping.py`), redacted and cut.
Its table loads the rest, or is kept as loaded where it is a whole list (`Table.page`); the run
is partial (`Refusals.set_aside` names it).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from ..http.errors import redact

RECORD_CHARS = 2_000  # a record kept for the admin is cut to this many characters
KEPT_PER_COLUMN = 100  # records kept per table.column and route in one run; the rest counted


@dataclass(frozen=True)
class SetAsideRecord:
    """One record set aside: where it was served and what it held (redacted, cut)."""

    table: str
    column: str  # the column it was served without
    route: str | None  # the route's template (`/enterprise/{eid}/devicegroup/`)
    record: str  # the record as JSON, the API key taken out, cut to `RECORD_CHARS`


def record_text(item: Any) -> str:
    """A record as the admin reads it: JSON, the API key taken out before the cut (a key cut
    first no longer matches), then cut to `RECORD_CHARS` with its length said."""
    try:
        text = orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):  # an integer beyond 64 bits
        text = json.dumps(item, sort_keys=True, default=str)
    text = redact(text)
    if len(text) <= RECORD_CHARS:
        return text
    tail = f"... (cut: {len(text):,} characters)"
    return text[: RECORD_CHARS - len(tail)] + tail


def _fingerprint(item: Any) -> str:
    try:
        content = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        content = json.dumps(item, sort_keys=True, default=str).encode()
    return hashlib.blake2b(content, digest_size=16).hexdigest()


class SetAside:
    """The records one run set aside, per (table, column, route): each distinct record counted
    once (a list read for its table and again for its children's routes names it twice), the
    first `KEPT_PER_COLUMN` of each kept as text. Thread-safe: the fan-outs set aside from dlt's
    worker threads. Written by `RunLedger.set_aside`. Read by the pipeline's runner (the
    `_esper_rejected` rows) and its reconciliation (`count`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str | None], set[str]] = {}
        self._records: list[SetAsideRecord] = []

    def add(self, table: str, column: str, route: str | None, items: list[Any]) -> int:
        """Set `items` aside; the number of distinct records set aside under the same
        (table, column, route) so far in this run."""
        where = (table, column, route)
        with self._lock:
            seen = self._seen.setdefault(where, set())
            for item in items:
                mark = _fingerprint(item)
                if mark in seen:
                    continue
                seen.add(mark)
                if len(seen) <= KEPT_PER_COLUMN:
                    self._records.append(SetAsideRecord(table, column, route, record_text(item)))
            return len(seen)

    def count(self, table: str) -> int:
        """How many records of `table` this run set aside (all its columns and routes)."""
        with self._lock:
            return sum(len(s) for (name, _, _), s in self._seen.items() if name == table)

    def tables(self) -> set[str]:
        with self._lock:
            return {table for table, _, _ in self._seen}

    def records(self) -> list[SetAsideRecord]:
        """The records kept for `_esper_rejected`, in the order they were set aside."""
        with self._lock:
            return list(self._records)
