"""Reading the Esper list envelopes, and walking their pages through the client.

The API has four list shapes (see ``docs/spec/README.md``, "Wire facts"):

* legacy and v1 (Django REST style): ``{count, next, previous, results}``;
* v0/v2 services: ``{code?, message?, content: {count, next, previous | prev, results}}``; an
  empty v2 list says ``results: null`` (``docs/spec/live-observations.md`` section 2);
* ``/v2/devices/`` cursor mode: ``{content: {results, next_cursor, prev_cursor, has_more,
  has_prev}}``;
* linkless lists named after what they hold, with a count and no links: ``{count, roles}``
  (``/authz2/v1/roles/``, docs/spec/openapi-notes-credentials-access.md section 4). The walk
  asks for the next ``offset`` (advanced by the items received) until it has ``count`` items.

``/v2/devices/`` is documented as a union of the offset and cursor shapes, so `parse_page` reads
whichever shape comes back and the iterators continue in that shape, whatever they asked for.

No HTTP policy lives here (retries, throttling, origin checks, concurrency): every request goes
through `EsperClient`, which refuses `next` links that leave the configured origin.

Every walk ends: besides a page that says there is no more, an empty page, a link or cursor seen
before, `_Progress` stops a list that keeps sending items it already sent (an API ignoring
``offset``, or a cursor list serving the same page under a new cursor) or more items than its
``count`` allows, with `EsperResponseError` (an API failure: exit 3).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

import orjson

from ..times import cursor_time
from .client import EsperClient
from .errors import EsperResponseError

log = logging.getLogger("esper_warehouse.source")

__all__ = [
    "Page",
    "bare_items",
    "bare_object",
    "iter_cursor_pages",
    "iter_pages",
    "iter_pages_parallel",
    "parse_page",
]


@dataclass
class Page:
    """One page of a list, whatever its envelope.

    Attributes:
        items: The records of the page.
        count: The total the API reports for the whole list (offset shapes), else None. Kept so
            the caller can reconcile what it loaded with what the API says it holds.
        next_url: The `next` link (offset shapes), else None.
        next_cursor: The cursor of the next page (cursor shape), else None.
        has_more: Whether the API says another page follows.
        linkless: A list without links (``{count, roles}``): the next page is the next offset,
            while fewer than `count` items have been walked.
    """

    items: list[dict]
    count: int | None
    next_url: str | None
    next_cursor: str | None
    has_more: bool
    linkless: bool = False


# Lists that name their items after what they hold and carry a count but no links.
LINKLESS_KEYS = ("roles",)


def parse_page(body: Any, *, where: str | None = None) -> Page:
    """Read a list answer in any of the four envelopes.

    Args:
        body: The parsed JSON of a list answer.
        where: The path or URL it came from, named in errors.

    Returns:
        The page.

    Raises:
        EsperResponseError: The body fits none of the envelopes (not an object, `results` missing
            or not a list of objects, a count or link of the wrong type, `has_more` without a
            `next_cursor`).
    """
    source = f" from {where}" if where else ""

    def bad(problem: str) -> EsperResponseError:
        return EsperResponseError(f"unexpected list answer{source}: {problem}")

    if not isinstance(body, dict):
        raise bad(f"expected a JSON object, got {type(body).__name__}")
    envelope = body
    if "results" not in body and "content" in body:
        envelope = body["content"]
        if not isinstance(envelope, dict):
            raise bad(f"'content' is {type(envelope).__name__}, not an object")
    linkless = next((k for k in LINKLESS_KEYS if k in envelope and "results" not in envelope), None)
    if "results" not in envelope and linkless is None:
        raise bad(f"no 'results' (keys: {sorted(envelope)[:10]})")
    items = envelope[linkless or "results"]
    if items is None and envelope.get("count") == 0 and not envelope.get("next"):
        items = []  # the v2 services answer an empty list with `results: null` (live, section 2)
    if not isinstance(items, list):
        raise bad(f"'{linkless or 'results'}' is {type(items).__name__}, not a list")
    if not all(isinstance(item, dict) for item in items):
        raise bad(f"'{linkless or 'results'}' holds something other than objects")

    count = envelope.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
        raise bad(f"'count' is {count!r}, not an integer")
    next_url = envelope.get("next") or None
    if next_url is not None and not isinstance(next_url, str):
        raise bad(f"'next' is {type(next_url).__name__}, not a URL")
    next_cursor = envelope.get("next_cursor") or None
    if next_cursor is not None and not isinstance(next_cursor, str):
        raise bad(f"'next_cursor' is {type(next_cursor).__name__}, not a string")

    if "has_more" in envelope or "next_cursor" in envelope:  # the cursor shape
        has_more = bool(envelope.get("has_more", next_cursor is not None))
        if has_more and next_cursor is None:
            raise bad("'has_more' is true but there is no 'next_cursor'")
    elif linkless:  # more while the count says so: `_continue` asks for the next offset
        has_more = count is not None and len(items) < count
    else:
        has_more = next_url is not None
    return Page(items, count, next_url, next_cursor, has_more, linkless=linkless is not None)


def bare_items(body: Any, *, where: str) -> list[dict]:
    """The items of a list answered whole as a bare JSON array: no envelope, no count, no pages
    (``GET /authz2/v1/roles/{role_id}/scopes``).

    Raises:
        EsperResponseError: The body is not an array of objects.
    """
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise EsperResponseError(
            f"unexpected list answer from {where}: expected a JSON array of objects, got "
            f"{type(body).__name__}"
        )
    return body


def bare_object(body: Any, *, where: str) -> dict:
    """A record answered as a bare JSON object (``GET /user/{id}/``, ``GET
    /authz2/v1/users/{user_id}/groups``).

    Raises:
        EsperResponseError: The body is not an object.
    """
    if not isinstance(body, dict):
        raise EsperResponseError(
            f"unexpected answer from {where}: expected a JSON object, got {type(body).__name__}"
        )
    return body


def iter_pages(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
) -> Iterator[Page]:
    """Walk an offset (or legacy) list: ``limit`` and ``offset=0``, then the `next` links.

    Args:
        client: The client every request goes through.
        path: The list path relative to the base URL, e.g. ``"/enterprise/<eid>/devicegroup/"``.
        params: Filters to send with the first request (the `next` links carry them on).
        limit: Page size to ask for (the API clamps it silently; the links carry what it used).

    Yields:
        Every page, in order, until the API says there is no more or a page comes back empty.

    Raises:
        EsperResponseError: A malformed page, or a `next` link that repeats (a loop).
        EsperConfigError: A `next` link to another origin (raised by the client, nothing sent).
    """
    first_params = {**(params or {}), "limit": limit, "offset": 0}
    yield from _walk(client, path, first_params, limit=limit)


def iter_cursor_pages(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
) -> Iterator[Page]:
    """Walk ``/v2/devices/`` by cursor: ``cursor=start``, then ``cursor=<next_cursor>``.

    The route is documented as a union of the cursor and offset shapes, so each page is read in
    whichever shape it comes back: while pages carry ``next_cursor``/``has_more`` the walk goes
    on by cursor; a page in the offset shape is continued by its `next` link.

    Args:
        client: The client every request goes through.
        path: The list path, ``"/v2/devices/"``.
        params: Filters sent with every cursor request.
        limit: Page size (the API allows up to 1000).

    Yields:
        Every page, in order (cursor pages run newest ``updated_at`` first), until ``has_more``
        is false, the offset `next` link is null, or a page comes back empty.

    Raises:
        EsperResponseError: A malformed page, or a cursor or link that repeats (a loop).
    """
    first_params = {**(params or {}), "cursor": "start", "limit": limit}
    yield from _walk(client, path, first_params, limit=limit)


def iter_pages_parallel(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
) -> Iterator[Page]:
    """Walk a big offset list with its pages fetched concurrently, yielded in offset order.

    The first page is fetched alone; its ``count`` and its length (the page size the API really
    used, which may be less than `limit`) give every remaining offset, and those pages are
    fetched through `EsperClient.map_in_order` under the client's adaptive concurrency. Pages are
    yielded in offset order; pages that arrive early wait in memory until their turn, a bounded
    number of them (a late page holds back the requests after it). When the last
    planned page still has a `next` link (the list grew meanwhile) the walk follows the links
    from there. Without a ``count`` (or in the cursor shape) it falls back to following links.

    Trade-off: offsets are a moving window. A record inserted (or removed) before an offset while
    the list is being read shifts every later record by one, so a record can appear on two pages
    or on none, exactly as with sequential offset paging; reading all pages at nearly the same
    moment makes the window shorter, not closed. Merge on the record key (duplicates are
    harmless) and reconcile the keys loaded against ``count``; on a shortfall, read the list
    again (or sequentially) rather than trust it.

    Args:
        client: The client every request goes through.
        path: The list path relative to the base URL.
        params: Filters sent with every request.
        limit: Page size to ask for.

    Yields:
        Every non-empty page, in offset order, up to the first empty one (a wrong ``count``
        costs at most the pages already in flight).

    Raises:
        EsperResponseError: A malformed page.
        EsperError: Whatever the client raises for a page (the first error wins).
    """
    base_params = dict(params or {})
    first = _get_page(client, path, {**base_params, "limit": limit, "offset": 0})
    if not first.items:
        return
    progress = _Progress(path)
    progress.add(first)
    yield first
    step = len(first.items)
    linked = first.next_url is not None or first.linkless  # a linkless list is planned by count
    if first.count is None or not linked or first.next_cursor is not None:
        yield from _continue(
            client, path, base_params, first, _url(client, path), limit=limit, progress=progress
        )
        return

    offsets = range(step, first.count, step)

    def fetch(offset: int) -> Page:
        return _get_page(client, path, {**base_params, "limit": step, "offset": offset})

    last = first
    with closing(client.map_in_order(fetch, offsets)) as fetched:
        for page in fetched:
            if not page.items:
                # The list ends before its count (it shrank, or the count is wrong): the
                # pages planned beyond it are not requested.
                return
            last = page
            progress.add(last)
            yield last
    if last.items and last.next_url:  # the list grew while being read (or count was stale)
        yield from _continue(
            client, path, base_params, last, _url(client, path), limit=limit, progress=progress
        )


# ------------------------------------------------------------------------------------- helpers

# Pages in a row without an item not seen before in the walk, before the walk is refused. Offsets
# are a moving window, so one page of repeats can happen (page-size inserts between two requests);
# two in a row is an API that ignores where the walk is.
_STALE_PAGES = 2


class _Progress:
    """Whether a list walk still makes progress: new items, and no more of them than its count.

    Items are known by their whole content (a repeat is the same record, unchanged). Raises
    `EsperResponseError` when `_STALE_PAGES` pages in a row bring no new item, or when the walk
    has received more than twice the largest ``count`` seen plus two pages (a list may grow while
    it is read, not that much).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.keys: set[int] = set()
        self.received = 0
        self.count: int | None = None
        self.stale = 0

    def add(self, page: Page) -> None:
        """Account for one page; raise when the walk is going round in circles."""
        new = 0
        for item in page.items:
            # The whole record, not its `id`: some lists repeat an `id` on every item (blueprint
            # versions carry their blueprint's). A hash keeps 100,000 devices in a few MB.
            key = hash(orjson.dumps(item))
            if key not in self.keys:
                self.keys.add(key)
                new += 1
        self.received += len(page.items)
        if page.count is not None:
            self.count = max(self.count or 0, page.count)
        self.stale = 0 if new else self.stale + 1
        if self.stale >= _STALE_PAGES:
            raise EsperResponseError(
                f"the list at {self.path} keeps sending items it already sent ({self.stale} "
                f"pages in a row without a new one; {len(self.keys)} distinct items in "
                f"{self.received} received{self._count_text()}): the API is not moving on to "
                "the next page (offset or cursor ignored); refusing to loop"
            )
        if self.count is not None and self.received > 2 * (self.count + len(page.items)):
            raise EsperResponseError(
                f"the list at {self.path} has sent {self.received} items for a count of "
                f"{self.count}: refusing to read on"
            )

    def _count_text(self) -> str:
        return "" if self.count is None else f" for a count of {self.count}"


def _walk(
    client: EsperClient, path: str, first_params: dict[str, Any], *, limit: int
) -> Iterator[Page]:
    """Fetch the first page with `first_params`, then follow the shape each page comes in."""
    first = _get_page(client, path, first_params)
    if not first.items:
        return
    progress = _Progress(path)
    progress.add(first)
    yield first
    cursor_params = {k: v for k, v in first_params.items() if k not in ("cursor", "offset")}
    yield from _continue(
        client, path, cursor_params, first, _url(client, path), limit=limit, progress=progress
    )


def _continue(
    client: EsperClient,
    path: str,
    params: dict[str, Any],
    page: Page,
    page_url: str,
    *,
    limit: int,
    progress: _Progress | None = None,
) -> Iterator[Page]:
    """Follow the pages after `page`: by `next_cursor` in the cursor shape, by `next`, or (a
    linkless list, `page` at offset 0) by the next offset while fewer than `count` were walked.

    Stops when a page says there is no more, when a page is empty (an API that keeps answering
    empty pages with a `next` would otherwise never end), and raises when a cursor or a link
    comes back a second time, or when pages stop bringing new items (`_Progress`): loops that
    would load the same records forever.
    """
    if progress is None:
        progress = _Progress(path)
        progress.add(page)
    seen: set[str] = set()
    walked = len(page.items)  # a linkless list's next offset
    while True:
        if page.next_cursor is not None and page.has_more:
            token = "cursor:" + page.next_cursor
            request = (path, {**params, "cursor": page.next_cursor, "limit": limit})
        elif page.linkless and page.count is not None and walked < page.count:
            token = f"offset:{walked}"
            request = (path, {**params, "limit": limit, "offset": walked})
        elif page.next_url is not None and page.has_more:
            page_url = urljoin(page_url, page.next_url)  # absolute links pass through unchanged
            token = "url:" + page_url
            request = (page_url, None)
        else:
            return
        if token in seen:
            raise EsperResponseError(
                f"the list at {path} sent the same next page twice ({token.split(':')[0]} "
                "repeated): refusing to loop"
            )
        seen.add(token)
        page = _get_page(client, *request)
        if not page.items:
            return
        walked += len(page.items)
        progress.add(page)
        yield page


def _get_page(client: EsperClient, path_or_url: str, params: Mapping[str, Any] | None) -> Page:
    """GET one page through the client and parse it (errors name the path)."""
    return parse_page(client.get(path_or_url, params), where=_route_text(client, path_or_url))


def _url(client: EsperClient, path: str) -> str:
    """The absolute URL of a path under the client's base URL (to resolve relative links)."""
    if "://" in path:
        return path
    return client.base_url + (path if path.startswith("/") else "/" + path)


def _route_text(client: EsperClient, path_or_url: str) -> str:
    """The path part of a request, for messages (queries can be long)."""
    text = path_or_url.removeprefix(client.base_url)
    return text.split("?", 1)[0]


# ------------------------------------------------------------------------ newest-first reads


@dataclass
class DescScan:
    """Early stop on a list served newest first, only while the order really is newest first.

    Items older than `stop_at` are dropped. Paging stops at the first page that reaches below
    `stop_at`, provided every cursor value seen so far ran in non-increasing order; once the
    order is seen broken, the whole list is read and filtered instead.
    """

    cursor: str | tuple[str, ...]
    stop_at: datetime | None
    ordered: bool = True
    stopped: bool = False
    newest: datetime | None = None
    _last: datetime | None = field(default=None, repr=False)

    def value(self, item: Mapping[str, Any]) -> datetime | None:
        names = (self.cursor,) if isinstance(self.cursor, str) else self.cursor
        name = next((n for n in names if item.get(n)), None)
        return None if name is None else cursor_time(item[name], name)

    def keep(self, items: list[dict]) -> list[dict]:
        """The items of one page at or after `stop_at`; decides whether to stop after it."""
        kept = []
        reached_old = False
        for item in items:
            ts = self.value(item)
            if ts is not None:
                if self._last is not None and ts > self._last:
                    if self.ordered:
                        log.info(
                            "%s order is not newest first: reading the whole list", self.cursor
                        )
                    self.ordered = False
                self._last = ts
                if self.newest is None or ts > self.newest:
                    self.newest = ts
            if self.stop_at is not None and ts is not None and ts < self.stop_at:
                reached_old = True
                continue
            kept.append(item)
        if reached_old and self.ordered:
            self.stopped = True
        return kept

    def pages(self, pages: Iterable[Page]) -> Iterator[tuple[Page, list[dict]]]:
        """Walk pages, yielding each with its kept items, until the early stop applies."""
        for page in pages:
            yield page, self.keep(page.items)
            if self.stopped:
                return
