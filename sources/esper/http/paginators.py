"""How a list is paged, declared per table (`Table.paginator`) in the shape of dlt's paginators
(`dlt.sources.helpers.rest_client.paginators`), and what a list answer says (`Page`).

A walk (`pages.walk`) asks its paginator, never the answer's shape, how to go on:
`init_request` sets the first request's parameters, `update_state(page)` reads what the answer
says of the next page, `has_next_page` tells whether there is one, and `update_request` turns
the request into it. Which route pages how (docs/spec/live-observations.md, live-shapes.json):

* `LinkPaginator` ("link"): ``limit`` and ``offset=0``, then the `next` links (legacy, v1, v0 and
  v2 lists; live, section 12: absolute links on the same host, ``limit`` and ``offset``).
* `CursorPaginator` ("cursor"): ``cursor=start``, then ``cursor=<next_cursor>`` while
  ``has_more`` (``/v2/devices/``). That route is documented as a union of the cursor and offset
  shapes, so a page that comes back in the offset shape is continued by its `next` link.
* `OffsetPaginator` ("offset"): ``limit`` and ``offset``, advanced by the items received, until
  ``count`` (lists with a count and no links: ``{count, roles}``).
* `SinglePage` ("none"): the whole list in one answer (a bare JSON array: a role's scopes).

`parse_page` reads any of the four list envelopes into a `Page` (the records and what the
answer says of the next page); the paginator decides what of it to follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urljoin

from .errors import EsperResponseError

__all__ = [
    "CursorPaginator",
    "LinkPaginator",
    "OffsetPaginator",
    "Page",
    "PageRequest",
    "Paginator",
    "SinglePage",
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
    elif linkless:  # more while the count says so: `OffsetPaginator` asks for the next offset
        has_more = count is not None and len(items) < count
    else:
        has_more = next_url is not None
    return Page(items, count, next_url, next_cursor, has_more, linkless=linkless is not None)


@dataclass
class PageRequest:
    """The request a walk sends next.

    Attributes:
        path_or_url: A path under the base URL, or an absolute URL (a `next` link).
        params: The query parameters (None: those of the link).
        url: The absolute URL of the page asked, against which a relative link is resolved.
    """

    path_or_url: str
    params: dict[str, Any] | None
    url: str


class Paginator:
    """The pages of one walk (one object per walk: it keeps the walk's state).

    Args:
        limit: The page size to ask for.
    """

    kind: ClassVar[str] = "none"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.token = ""  # what names the next page, to refuse a walk asking for it twice
        self._has_next = False

    def init_request(self, request: PageRequest) -> None:
        """Set the first request's parameters."""

    def update_state(self, page: Page) -> None:
        """Read from `page` whether a next page follows, and which."""
        self._has_next = False

    def update_request(self, request: PageRequest) -> None:
        """Turn `request` into the next page's."""
        raise NotImplementedError(f"{type(self).__name__} has no next page")

    @property
    def has_next_page(self) -> bool:
        """Whether the last answer says a next page follows."""
        return self._has_next


class SinglePage(Paginator):
    """The whole list in one answer: nothing to follow."""


class LinkPaginator(Paginator):
    """``limit`` and ``offset=0``, then the `next` links."""

    kind = "link"

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._next: str | None = None

    def init_request(self, request: PageRequest) -> None:
        request.params = {**(request.params or {}), "limit": self.limit, "offset": 0}

    def update_state(self, page: Page) -> None:
        if page.has_more and page.next_url is None:  # a cursor, or a count without links
            raise EsperResponseError(f"a page in the {_shape(page)} shape")
        self._next = page.next_url if page.has_more else None
        self._has_next = self._next is not None

    def update_request(self, request: PageRequest) -> None:
        assert self._next is not None
        # absolute links pass through unchanged; the client keeps them on the configured origin
        request.url = request.path_or_url = urljoin(request.url, self._next)
        request.params = None
        self.token = "url:" + request.url


class CursorPaginator(LinkPaginator):
    """``cursor=start``, then ``cursor=<next_cursor>`` while ``has_more``; a page in the offset
    shape (the route is documented as a union of both) is continued by its `next` link."""

    kind = "cursor"

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._cursor: str | None = None
        self._filters: dict[str, Any] = {}
        self._path = ""

    def init_request(self, request: PageRequest) -> None:
        self._path, self._filters = request.path_or_url, dict(request.params or {})
        request.params = {**self._filters, "cursor": "start", "limit": self.limit}

    def update_state(self, page: Page) -> None:
        self._cursor = page.next_cursor if page.has_more else None
        if self._cursor is None:
            super().update_state(page)  # the offset shape: its `next` link, if any
        else:
            self._has_next = True

    def update_request(self, request: PageRequest) -> None:
        if self._cursor is None:
            super().update_request(request)
            return
        # on the list's path, not a link followed before (its query holds an offset)
        request.path_or_url = self._path
        request.params = {**self._filters, "cursor": self._cursor, "limit": self.limit}
        self.token = "cursor:" + self._cursor


class OffsetPaginator(Paginator):
    """``limit`` and ``offset``, advanced by the items received, until ``count``."""

    kind = "offset"

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._offset = 0

    def init_request(self, request: PageRequest) -> None:
        request.params = {**(request.params or {}), "limit": self.limit, "offset": 0}

    def update_state(self, page: Page) -> None:
        if page.next_cursor is not None and page.has_more:
            raise EsperResponseError(f"a page in the {_shape(page)} shape")
        self._offset += len(page.items)
        self._has_next = page.count is not None and self._offset < page.count

    def update_request(self, request: PageRequest) -> None:
        request.params = {**(request.params or {}), "limit": self.limit, "offset": self._offset}
        self.token = f"offset:{self._offset}"


def _shape(page: Page) -> str:
    """The envelope a page came in, for messages."""
    if page.next_cursor is not None:
        return "cursor"
    return "count without links" if page.linkless else "offset"
