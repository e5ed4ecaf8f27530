"""How much of a list a table reads: complete lists (checked against their count), fan-outs.

Every request goes through the client (which owns retries and throttling) and the paginator (which
owns envelopes and links); this module only decides how much of a list a table needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .client import EsperClient
from .pages import Page, iter_pages, iter_pages_parallel

log = logging.getLogger("esper_warehouse.source")

P = TypeVar("P")


def url_id(value: Any) -> str | None:
    """The id at the end of a legacy link (`.../device/<uuid>/`), or the value itself."""
    if not value:
        return None
    text = str(value).rstrip("/")
    return text.rsplit("/", 1)[-1]


@dataclass
class ListRead:
    """A whole list, read to its end: its items (unique by key) and the API's count.

    `count` is the count of distinct items: the API's count less the extra copies of a key the
    list served more than once in every pass (`read_all`): an item served twice is not missing.
    `items` holds what `read_all`'s `keep` kept of each item, when it is given one.
    """

    items: list[Any]
    count: int
    complete: bool = True


def read_all(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
    key: tuple[str, ...] = ("id",),
    parallel: bool = False,
    prefer: Callable[[dict, dict], dict] | None = None,
    keep: Callable[[dict], Any] | None = None,
) -> ListRead:
    """Read a whole offset list; read it again once if fewer unique items came than its count.

    Offsets are a moving window: an item inserted while the list is paged can shift another past
    the page boundary. A second pass fills the gap (items are merged by key), so only a list that
    is still short after two passes is reported short (to reconciliation, not hidden here).

    A key served more than once in every pass is the list's own (two records with one id, not a
    moving window): its copies are one item, kept once (`prefer(kept, other)` picks which; by
    default the last read), counted once, and logged.

    `keep(item)` is what the read holds of each item, in its place (`prefer` then compares what
    was kept): a list read for its keys or a few fields holds those alone, page by page, not every
    record whole (150,000 device records are ~0.5 GB of Python objects).
    """
    by_key: dict[tuple[Any, ...], dict] = {}
    repeated: dict[tuple[Any, ...], int] | None = None  # key -> copies, in every pass so far
    count = 0
    for _ in range(2):
        count = 0
        copies: dict[tuple[Any, ...], int] = {}
        pages: Iterable[Page] = (
            iter_pages_parallel(client, path, params, limit=limit)
            if parallel
            else iter_pages(client, path, params, limit=limit)
        )
        for page in pages:
            count = max(count, page.count or 0)
            for item in page.items:
                value = tuple(item.get(k) for k in key)
                copies[value] = copies.get(value, 0) + 1
                if keep is not None:
                    item = keep(item)
                kept = by_key.get(value)
                by_key[value] = item if kept is None or prefer is None else prefer(kept, item)
        twice = {k: n for k, n in copies.items() if n > 1}
        repeated = (
            twice
            if repeated is None
            else {k: min(n, twice[k]) for k, n in repeated.items() if k in twice}
        )
        if len(by_key) >= count:
            break
        log.info(
            "%s: %d unique items for a count of %d, reading it again", path, len(by_key), count
        )
    # the copies explain (part of) a shortfall only when every pass served them
    extra = min(sum(n - 1 for n in (repeated or {}).values()), max(count - len(by_key), 0))
    if extra:
        log.warning(
            "%s: the API served %d key(s) more than once (%s): each kept once, not missing",
            path,
            len(repeated or {}),
            ", ".join("/".join(map(str, k)) for k in sorted(repeated or {}, key=str)),
        )
    return ListRead(list(by_key.values()), count - extra)


def first_seen(
    items: Iterable[dict], seen: set[tuple[Any, ...]], key: tuple[str, ...]
) -> list[dict]:
    """The items whose key is not in `seen` yet, which are added to it: each key once per run.

    Offset and cursor pages are moving windows: a change while a list is paged can serve an item
    on two pages. A table's first load appends (`pipelines.dispositions.append_on_first_load`), so a
    read that yields page by page keeps each key once itself.
    """
    kept = []
    for item in items:
        value = tuple(item.get(k) for k in key)
        if value not in seen:
            seen.add(value)
            kept.append(item)
    return kept


def fan_out(
    client: EsperClient, parents: Iterable[P], fetch: Callable[[P], Any], *, bulk: bool = False
) -> Iterator[tuple[P, Any]]:
    """`fetch(parent)` for every parent, concurrently through the client; (parent, result) pairs.

    `bulk`: a background fan-out (per device page) whose requests yield to the others'.
    """

    def one(parent: P) -> tuple[P, Any]:
        return parent, fetch(parent)

    yield from client.map(one, parents, bulk=bulk)


def batches(items: Iterable[P], size: int) -> Iterator[list[P]]:
    """Split an iterable into lists of at most `size`."""
    batch: list[P] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
