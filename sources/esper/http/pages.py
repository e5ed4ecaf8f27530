"""Walking the Esper lists' pages through the client, each as its table's paginator says.

The API has four list shapes (see ``docs/spec/README.md``, "Wire facts"), read by
`paginators.parse_page`:

* legacy and v1 (Django REST style): ``{count, next, previous, results}``;
* v0/v2 services: ``{code?, message?, content: {count, next, previous | prev, results}}``; an
  empty v2 list says ``results: null`` (``docs/spec/live-observations.md`` section 2);
* ``/v2/devices/`` cursor mode: ``{content: {results, next_cursor, prev_cursor, has_more,
  has_prev}}``;
* linkless lists named after what they hold, with a count and no links: ``{count, roles}``
  (``/authz2/v1/roles/``, docs/spec/openapi-notes-credentials-access.md section 4). The walk
  asks for the next ``offset`` (advanced by the items received) until it has ``count`` items.

How a walk goes on is declared, not read off each answer: every walk takes its table's
paginator (`Table.paginator`: `paginators.LinkPaginator`, `CursorPaginator`, `OffsetPaginator`,
`SinglePage`), which sets the first request and reads the next one from each page. A page the
declared paginator cannot follow (a cursor, or a count without links, where links were
declared) fails the walk (`EsperResponseError`) instead of ending it short.

No HTTP policy lives here (retries, throttling, origin checks, concurrency): every request goes
through `EsperClient`, which refuses `next` links that leave the configured origin.

Below the walks, how much of a list a table reads: a whole list checked against its count
(`read_all`, read twice when short), each key once per run (`first_seen`), and fan-outs over
parents (`fan_out`, `batches`). Where an incremental read stops (`EarlyStop`) belongs to the
watermarks: `run/state.py`.

Every walk ends: besides a page that says there is no more, an empty page, a link or cursor seen
before, `_Progress` stops a list that keeps sending items it already sent (an API ignoring
``offset``, or a cursor list serving the same page under a new cursor) or more items than its
``count`` allows, with `EsperResponseError` (an API failure: exit 3).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from .client import EsperClient
from .errors import EsperResponseError
from .paginators import (
    LinkPaginator,
    Page,
    PageRequest,
    Paginator,
    parse_page,
)

log = logging.getLogger("esper_warehouse.source")

P = TypeVar("P")

__all__ = [
    "ListRead",
    "Page",
    "all_keyed",
    "bare_items",
    "bare_object",
    "batches",
    "fan_out",
    "first_seen",
    "iter_pages",
    "iter_pages_parallel",
    "parse_page",
    "read_all",
    "url_id",
    "walk",
]


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


def walk(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None,
    paginator: Paginator,
) -> Iterator[Page]:
    """Walk a list as its paginator says: the first page, then each next one it asks for.

    Args:
        client: The client every request goes through.
        path: The list path relative to the base URL, e.g. ``"/enterprise/<eid>/devicegroup/"``.
        params: Filters to send with the first request (links carry them on; cursor and offset
            requests repeat them).
        paginator: A new paginator of the list's kind (`Table.paginator(limit)`).

    Yields:
        Every page, in order, until the paginator has no next page or a page comes back empty.

    Raises:
        EsperResponseError: A malformed page, a page the paginator cannot follow, or a next
            page asked for twice (a loop).
        EsperConfigError: A `next` link to another origin (raised by the client, nothing sent).
    """
    request = PageRequest(path, dict(params or {}), _url(client, path))
    paginator.init_request(request)
    page = _get_page(client, request.path_or_url, request.params)
    if not page.items:
        return
    progress = _Progress(path)
    progress.add(page)
    yield page
    yield from _follow(client, path, page, request, paginator, progress)


def iter_pages(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
    paginator: type[Paginator] = LinkPaginator,
) -> Iterator[Page]:
    """Walk a list with a new `paginator` (by default: ``limit``, ``offset=0``, then `next`
    links); see `walk`. `limit`: the page size to ask for (the API clamps it silently; the links
    carry what it used)."""
    yield from walk(client, path, params, paginator(limit))


def iter_pages_parallel(
    client: EsperClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int,
    paginator: type[Paginator] = LinkPaginator,
) -> Iterator[Page]:
    """Walk a big offset list with its pages fetched concurrently, yielded in offset order.

    The first page is fetched alone; its ``count`` and its length (the page size the API really
    used, which may be less than `limit`) give every remaining offset, and those pages are
    fetched through `EsperClient.map_in_order` under the client's adaptive concurrency. Pages are
    yielded in offset order; pages that arrive early wait in memory until their turn, a bounded
    number of them (a late page holds back the requests after it). When the last
    planned page still has a `next` link (the list grew meanwhile) the walk follows the links
    from there. Without a ``count``, or for a list not paged by offset (`paginator`), it walks
    one page after another as its paginator says.

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
        paginator: The list's paginator (`Table.paginator`).

    Yields:
        Every non-empty page, in offset order, up to the first empty one (a wrong ``count``
        costs at most the pages already in flight).

    Raises:
        EsperResponseError: A malformed page.
        EsperError: Whatever the client raises for a page (the first error wins).
    """
    base_params = dict(params or {})
    pages = paginator(limit)
    request = PageRequest(path, dict(base_params), _url(client, path))
    pages.init_request(request)
    first = _get_page(client, path, request.params)
    if not first.items:
        return
    progress = _Progress(path)
    progress.add(first)
    yield first
    step = len(first.items)
    if first.count is None or not first.has_more or pages.kind not in ("link", "offset"):
        yield from _follow(client, path, first, request, pages, progress)
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
        links = LinkPaginator(limit)
        yield from _follow(
            client, path, last, PageRequest(path, None, request.url), links, progress
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


def _follow(
    client: EsperClient,
    path: str,
    page: Page,
    request: PageRequest,
    paginator: Paginator,
    progress: _Progress,
) -> Iterator[Page]:
    """The pages after `page` (the answer to `request`), as `paginator` asks for them.

    Stops when the paginator has no next page, or when a page is empty (an API that keeps
    answering empty pages with a `next` would otherwise never end), and raises when the same
    next page is asked for a second time, or when pages stop bringing new items (`_Progress`):
    loops that would load the same records forever.
    """
    seen: set[str] = set()
    while True:
        try:
            paginator.update_state(page)
        except EsperResponseError as error:
            raise EsperResponseError(
                f"the list at {path} sent {error}, which its {paginator.kind} paginator "
                "does not follow: refusing to stop short"
            ) from None
        if not paginator.has_next_page:
            return
        paginator.update_request(request)
        if paginator.token in seen:
            raise EsperResponseError(
                f"the list at {path} sent the same next page twice "
                f"({paginator.token.split(':')[0]} repeated): refusing to loop"
            )
        seen.add(paginator.token)
        page = _get_page(client, request.path_or_url, request.params)
        if not page.items:
            return
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


# -------------------------------------------------------------------------- how much of a list


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
    paginator: type[Paginator] = LinkPaginator,
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

    An item without a value in a `key` field is no key's copy: it is kept as served, each one
    (the last pass's), never merged, never a repeat that lowers the count, so that the table
    reading it names the missing key (`Table.page`, `Table.require`). `paginator`: how the list
    pages (`Table.paginator`).
    """
    by_key: dict[tuple[Any, ...], dict] = {}
    keyless: list[Any] = []  # the last pass's items without a key value (no two are one item)
    repeated: dict[tuple[Any, ...], int] | None = None  # key -> copies, in every pass so far
    count = 0
    for _ in range(2):
        count = 0
        keyless = []
        copies: dict[tuple[Any, ...], int] = {}
        pages: Iterable[Page] = (
            iter_pages_parallel(client, path, params, limit=limit, paginator=paginator)
            if parallel
            else iter_pages(client, path, params, limit=limit, paginator=paginator)
        )
        for page in pages:
            count = max(count, page.count or 0)
            for item in page.items:
                value = tuple(item.get(k) for k in key)
                if not all_keyed(value):
                    keyless.append(item if keep is None else keep(item))
                    continue
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
        if len(by_key) + len(keyless) >= count:
            break
        held = len(by_key) + len(keyless)
        log.info("%s: %d unique items for a count of %d, reading it again", path, held, count)
    # the copies explain (part of) a shortfall only when every pass served them
    held = len(by_key) + len(keyless)
    extra = min(sum(n - 1 for n in (repeated or {}).values()), max(count - held, 0))
    if extra:
        log.warning(
            "%s: the API served %d key(s) more than once (%s): each kept once, not missing",
            path,
            len(repeated or {}),
            ", ".join("/".join(map(str, k)) for k in sorted(repeated or {}, key=str)),
        )
    return ListRead([*by_key.values(), *keyless], count - extra)


def all_keyed(value: tuple[Any, ...]) -> bool:
    """Whether a key has a value in every field (absent, null or empty is none)."""
    return all(part is not None and part != "" for part in value)


def first_seen(
    items: Iterable[dict], seen: set[tuple[Any, ...]], key: tuple[str, ...]
) -> list[dict]:
    """The items whose key is not in `seen` yet, which are added to it: each key once per run.

    Offset and cursor pages are moving windows: a change while a list is paged can serve an item
    on two pages. A table's first load appends (`pipelines.run.dispositions.append_on_first_load`), so a
    read that yields page by page keeps each key once itself. An item without a key value is
    kept, each one, for its table to name (`read_all`).
    """
    kept = []
    for item in items:
        value = tuple(item.get(k) for k in key)
        if not all_keyed(value):
            kept.append(item)
        elif value not in seen:
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
