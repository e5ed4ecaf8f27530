"""`esper-warehouse doctor`: a bounded, read-only probe of a tenant's wire shapes.

One small page (``limit`` 3) per route the source reads, about 25 requests in all, every one
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
requests is a route the key cannot read: a run skips that table (a partial run), so it is listed
as refused, every other route is still probed, and the exit code does not change. An extra key, a null where a value was seen, a change
anywhere else, or anything on a route the source does not read is a **note**. A refused key or a
wrong enterprise id or base URL is exit 2. See docs/decisions.md, "doctor".

The report holds no values: route templates (ids replaced by ``{id}``), status codes, envelope
families, JSON types, counts, timings, and key names from an allowlist (`known_keys`: the
references' field names and the source's declared columns); any other key is ``<unknown key>``.
The API key is masked in the printed and written report as a last guard.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, TextIO

import httpx
from esper_warehouse.sources.esper.common import apps_route
from esper_warehouse.sources.esper.http import (
    EsperAuthError,
    EsperClient,
    EsperConfigError,
    EsperError,
    EsperNotFoundError,
    EsperResponseError,
)
from esper_warehouse.sources.esper.pagination import parse_page
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.data_tap import DATA_TAP_PATH
from esper_warehouse.sources.esper.tables.devices import LEGACY_DEVICES_PATH, V2_DEVICE_APPS_PATH

from esper_warehouse import data_path

from .exit_codes import Exit

EXIT_OK, EXIT_CONFIG, EXIT_DRIFT = Exit.OK, Exit.CONFIG, Exit.DRIFT  # exit_codes.py
MAX_REQUESTS = 40  # attempts on the wire, retries included; a hard bound (see Doctor.probe)
MAX_RETRIES = 2  # retries of one probe (429, 5xx, timeouts): a probe sends at most 3 requests
MAX_RETRY_WAIT_S = 10.0  # seconds one probe may wait between its attempts (Retry-After, backoff)
BACKOFF_MAX_S = 2.0  # the longest backoff between two attempts without Retry-After
REQUEST_TIMEOUT_S = 15.0  # one request's timeout
TIME_BUDGET_S = 120.0  # no probe starts after this; the whole doctor ends within ~TIME_LIMIT_S
PROBE_LIMIT = 3  # items per list page (the live evidence was recorded at limit 3)
DATA_TAP_POLL_S = 1.0  # between the reads of the probe query's status
SPEC_DIR = data_path("docs", "spec")
LIVE_SHAPES = SPEC_DIR / "live-shapes.json"
OPENAPI = SPEC_DIR / "esper-openapi-subset.json"
# What the paginator reads from a list envelope (`sources/esper/pagination.py`, `parse_page`).
ENVELOPE_READS = frozenset({"results", "count", "next", "next_cursor", "has_more"})
BREAK, NOTE = "break", "note"
_LINKS = frozenset({"next", "prev", "previous", "next_cursor", "prev_cursor"})
_MAX_NOTES_PER_ROUTE = 25
_SHAPE_DEPTH = 5  # containers deeper than this are shown as "object"/"list" (as live-shapes.json)
UNKNOWN_KEY = "<unknown key>"  # what the report shows for a key not in `known_keys()`
_PLACEHOLDER = re.compile(r"\{[^}]*\}")
_LIVE_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "NoneType": "null",
    "dict": "object",
    "list": "list",
}
_SPEC_TYPES = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "object": "object",
    "array": "list",
}


# ------------------------------------------------------------------------------ reference shapes


@dataclass
class Node:
    """An expected JSON value, merged over every variant the reference shows.

    Attributes:
        types: JSON types seen (``object list string integer number boolean null``); empty = any.
        keys: An object's keys; None when the reference does not show them (``{}``, ``"dict"``).
        required: Keys present in every object variant.
        items: A list's element; None when the reference does not show one (``[]``, null).
    """

    types: set[str] = field(default_factory=set)
    keys: dict[str, Node] | None = None
    required: set[str] = field(default_factory=set)
    items: Node | None = None


def merge(a: Node | None, b: Node | None) -> Node | None:
    """Two variants of a value as one expectation (a key is required only if both have it)."""
    if a is None or b is None:
        return a or b
    out = Node(a.types | b.types)
    objects = [n for n in (a, b) if "object" in n.types]
    if objects and all(n.keys is not None for n in objects):
        out.keys = {}
        for n in objects:
            for key, child in (n.keys or {}).items():
                out.keys[key] = merge(out.keys.get(key), child)  # type: ignore[assignment]
        out.required = set.intersection(*(n.required for n in objects))
    for n in (a, b):
        if "list" in n.types:
            out.items = merge(out.items, n.items)
    return out


def from_live(shape: Any) -> Node:
    """A reference from a live-shapes.json type map (also used for the documented Data Tap shapes,
    whose leaves may read ``"int|NoneType"`` or ``"str (required, SQL)"``)."""
    if isinstance(shape, str):
        types = {_LIVE_TYPES.get(t.split(" ")[0].strip(), "") for t in shape.split("|")}
        return Node(types - {""})
    if isinstance(shape, dict):
        if not shape:
            return Node({"object"})
        return Node({"object"}, {k: from_live(v) for k, v in shape.items()}, set(shape))
    node = Node({"list"})
    for variant in shape:
        node.items = merge(node.items, from_live(variant))
    return node


def from_spec(schema: Mapping[str, Any], doc: Mapping[str, Any], seen: tuple = ()) -> Node:
    """A reference from an OpenAPI schema (``$ref``, ``allOf``, ``oneOf``/``anyOf``, nullable)."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        if name in seen:
            return Node()
        return from_spec(doc["components"]["schemas"][name], doc, (*seen, name))
    node: Node | None = None
    for union in ("oneOf", "anyOf"):
        for variant in schema.get(union, ()):
            node = merge(node, from_spec(variant, doc, seen))
    if "allOf" in schema:
        whole = Node({"object"}, {}, set())
        for part in schema["allOf"]:
            sub = from_spec(part, doc, seen)
            whole.keys.update(sub.keys or {})  # type: ignore[union-attr]
            whole.required |= sub.required
        node = merge(node, whole)
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "object" in kinds or "properties" in schema:
        props = schema.get("properties")
        keys = {k: from_spec(v, doc, seen) for k, v in props.items()} if props else None
        node = merge(node, Node({"object"}, keys, set(schema.get("required", ()))))
    if "array" in kinds:
        node = merge(node, Node({"list"}, items=from_spec(schema.get("items", {}), doc, seen)))
    for kind in kinds - {"object", "array"}:
        if kind == "null":
            node = merge(node, Node({"null"}))
        elif kind in _SPEC_TYPES:
            node = merge(node, Node({_SPEC_TYPES[kind]}))
    node = node or Node()
    if schema.get("nullable"):
        node.types.add("null")
    return node


@cache
def _live_document() -> dict[str, Any]:
    return json.loads(LIVE_SHAPES.read_text())  # type: ignore[no-any-return]


@cache
def _openapi() -> dict[str, Any]:
    return json.loads(OPENAPI.read_text())  # type: ignore[no-any-return]


def _norm(path: str) -> str:
    return _PLACEHOLDER.sub("{}", path).rstrip("/")


def live_reference(method: str, path: str) -> Node | None:
    """The live recording of a route (answered 200), or None when there is none."""
    for route in _live_document()["routes"]:
        if (
            route["method"] == method
            and _norm(route["path"]) == _norm(path)
            and route.get("status") == 200
        ):
            return from_live(route["observed"])
    return None


def docs_reference(method: str, path: str) -> Node | None:
    """The documented shape of a route with no live recording (Data Tap), or None."""
    for doc in _live_document().get("docs_only", ()):
        for route in doc.get("routes", ()):
            if route["method"] == method and _norm(route["path"]) == _norm(path):
                return from_live(route["response_shape"])
    return None


def spec_reference(method: str, path: str) -> Node | None:
    """The OpenAPI subset's 200 answer of a route, or None."""
    doc = _openapi()
    for spec_path, ops in doc["paths"].items():
        if _norm(spec_path) != _norm(path):
            continue
        answer = ops.get(method.lower(), {}).get("responses", {})
        answer = answer.get("200") or answer.get("201") or {}
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        return from_spec(schema, doc) if schema else None
    return None


@dataclass
class Reference:
    """What a route's answer is compared with, and where that came from."""

    root: Node | None
    record: Node | None
    basis: str  # "live", "docs", "spec" or "none"


def reference(method: str, template: str, *, cursor: bool = False) -> Reference:
    """The live recording of a route, else its documented shape, else the OpenAPI subset's;
    records fall back to the spec's where the live sample had none (an empty list).

    The ``/v2/devices/`` cursor mode has no live recording (the evidence pages by offset): its
    envelope is the spec's, its records the live ones.
    """
    live = None if cursor else live_reference(method, template)
    docs = docs_reference(method, template)
    spec = spec_reference(method, template)
    root = live or docs or spec
    basis = "live" if live else "docs" if docs else "spec" if spec else "none"
    records = live or docs or (live_reference(method, template) if cursor else None)
    return Reference(root, record_node(records) or record_node(spec), basis)


def families(root: Node | Mapping[str, Any] | None) -> set[str]:
    """Envelope families of a reference node or of an answer."""
    if root is None:
        return set()
    if isinstance(root, Node):
        top = set(root.keys or {}) if "object" in root.types else set()
        content_node = (root.keys or {}).get("content")
        content = (
            set(content_node.keys or {})
            if content_node is not None and "object" in content_node.types
            else None
        )
    elif isinstance(root, Mapping):
        top = set(root)
        inner = root.get("content")
        content = set(inner) if isinstance(inner, Mapping) else None
    else:
        return {"list" if isinstance(root, list) else json_type(root)}
    if content is not None and "results" not in top:
        found = set()
        if {"next_cursor", "has_more"} & content:
            found.add("cursor-list")
        if "results" in content and ({"next", "count"} & content or not found):
            found.add("content-list")
        return found or {"content-object"}
    return {"legacy-list"} if "results" in top else {"bare-object"}


def _envelope_node(root: Node) -> Node:
    content = (root.keys or {}).get("content")
    return content if content is not None and "results" not in (root.keys or {}) else root


def record_node(root: Node | None) -> Node | None:
    """Where the records sit in a reference: list items, the content object, or the root."""
    if root is None:
        return None
    envelope = _envelope_node(root)
    results = (envelope.keys or {}).get("results")
    if results is not None:
        return results.items
    return envelope


# -------------------------------------------------------------------------------- comparison


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _keys_of(value: Any, into: set[str]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            into.add(str(key))
            _keys_of(child, into)
    elif isinstance(value, list):
        for child in value:
            _keys_of(child, into)


@cache
def known_keys() -> frozenset[str]:
    """Every field name doctor may print: an allowlist derived from the references.

    The keys of the recorded live shapes (``docs/spec/live-shapes.json``), the property names of
    the OpenAPI subset, and the source's declared keys, cursors and column paths (snake_case and
    camelCase). Any other key (a name, serial or id used as a JSON key, the API key echoed back)
    is reported as ``<unknown key>``.
    """
    names: set[str] = set(ENVELOPE_READS | _LINKS)
    live = _live_document()
    for route in live["routes"]:
        _keys_of(route.get("observed"), names)
    for doc in live.get("docs_only", ()):
        for route in doc.get("routes", ()):
            _keys_of(route.get("response_shape"), names)
    for schema in _walk_properties(_openapi()):
        names.add(schema)
    for endpoint in TABLES.values():
        names |= set(endpoint.key) | ({endpoint.cursor} if endpoint.cursor else set())
    for table in TABLES.values():
        for column in table.columns:
            names |= set(column.path or ())
    names |= {_camel(n) for n in names}
    return frozenset(n for n in names if not any(c in n for c in "{}/ "))


def _walk_properties(value: Any) -> Iterator[str]:
    """The property names of every schema in an OpenAPI document."""
    if isinstance(value, dict):
        props = value.get("properties")
        if isinstance(props, dict):
            yield from (str(k) for k in props)
        for child in value.values():
            yield from _walk_properties(child)
    elif isinstance(value, list):
        for child in value:
            yield from _walk_properties(child)


def safe_key(key: str) -> str:
    """A key name fit for the report: a field name the references know, else ``<unknown key>``."""
    return key if key in known_keys() else UNKNOWN_KEY


def shape_of(value: Any, depth: int = 0) -> Any:
    """The type map of an answer, in live-shapes.json's notation, with unsafe keys hidden."""
    if isinstance(value, dict):
        if depth >= _SHAPE_DEPTH:
            return "dict"
        return {safe_key(k): shape_of(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= _SHAPE_DEPTH:
            return "list"
        shapes: list[Any] = []
        seen: set[str] = set()  # one canonical text per shape: linear in the body
        for item in value:
            s = shape_of(item, depth + 1)
            text = json.dumps(s, sort_keys=True)
            if text not in seen:
                seen.add(text)
                shapes.append(s)
        return shapes
    return type(value).__name__


@dataclass
class Finding:
    """One difference from the reference (no values: a route, a place, a field, types)."""

    severity: str
    route: str
    where: str  # "envelope", "items", "record" or "route"
    field: str
    problem: str

    def text(self) -> str:
        """``GET /v2/devices/ items: software_info is list, expected object``, or ``...: missing
        key results``."""
        if self.problem.startswith(("missing key", "extra key")) and self.field:
            head, _, rest = self.problem.partition(" key")
            return f"{self.route} {self.where}: {head} key {self.field}{rest}"
        name = f"{self.field} " if self.field else ""
        return f"{self.route} {self.where}: {name}{self.problem}"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _has(node: Node | None, path: tuple[str, ...]) -> bool:
    """Whether the reference has ``path``; below an object whose keys it does not show (a
    container collapsed at depth 5, an empty sample) it may, so it counts."""
    for key in path:
        if node is not None and "object" in node.types and node.keys is None:
            return True
        if node is None or node.keys is None or key not in node.keys:
            return False
        node = node.keys[key]
    return True


def required_paths(table: str | None, record: Node | None) -> set[tuple[str, ...]]:
    """The record fields a run cannot do without on a route: the table's primary key and cursor
    (every declared column is nullable: `sources/esper/arrow.py`), where the reference has them."""
    endpoint = TABLES.get(table) if table else None
    if endpoint is None or record is None:
        return set()
    names = [(k,) for k in endpoint.key] + ([(endpoint.cursor,)] if endpoint.cursor else [])
    return {
        variant
        for path in names
        for variant in (path, tuple(_camel(p) for p in path))
        if _has(record, variant)
    }


def read_paths(table: str | None, record: Node | None) -> set[tuple[str, ...]]:
    """The record fields the source reads on a route: the table's key, cursor and flattened
    fields (snake_case or camelCase) that the route's reference carries."""
    if table is None or record is None:
        return set()
    names: list[tuple[str, ...]] = []
    endpoint = TABLES.get(table)
    if endpoint is not None:
        names += [(k,) for k in endpoint.key]
        names += [(endpoint.cursor,)] if endpoint.cursor else []
    if table in TABLES:
        names += [c.path for c in TABLES[table].columns if c.path]
    found = set()
    for path in names:
        for variant in (path, tuple(_camel(p) for p in path)):
            if _has(record, variant):
                found.add(variant)
    return found


class _Compare:
    """Compares one answer with its reference and collects findings for one route."""

    def __init__(
        self,
        route: str,
        used: bool,
        reads: set[tuple[str, ...]],
        required: set[tuple[str, ...]] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        self.route, self.used, self.reads, self.required = route, used, reads, required
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str, str]] = set()

    def add(self, breaks: bool, where: str, path: tuple[str, ...], problem: str) -> None:
        name = ".".join(safe_key(p) if p != "[]" else "[]" for p in path).replace(".[]", "[]")
        if (where, name, problem) in self._seen:
            return
        self._seen.add((where, name, problem))
        severity = BREAK if breaks and self.used else NOTE
        self.findings.append(Finding(severity, self.route, where, name, problem))

    def _is_read(self, path: tuple[str, ...]) -> bool:
        return any(read[: len(path)] == path for read in self.reads)

    def _is_required(self, path: tuple[str, ...]) -> bool:
        return any(need[: len(path)] == path for need in self.required)

    def value(self, value: Any, node: Node, path: tuple[str, ...], where: str) -> None:
        kind = json_type(value)
        ok = not node.types or kind in node.types or (kind == "integer" and "number" in node.types)
        if not ok:
            expected = " or ".join(sorted(node.types - {"null"})) or "null"
            if kind == "null":
                self.add(False, where, path, f"is null, the reference shows {expected}")
            elif node.types != {"null"}:  # only nulls seen: no proof of "never a value"
                self.add(self._is_read(path), where, path, f"is {kind}, expected {expected}")
            return
        if kind == "object" and node.keys is not None:
            for key in sorted(node.required - set(value)):
                # Only a key or cursor the run needs breaks it: other columns are nullable.
                self.add(self._is_required((*path, key)), where, (*path, key), "missing key")
            for key in sorted(set(node.keys) - node.required - set(value)):
                if self._is_read((*path, key)):
                    self.add(False, where, (*path, key), "missing key (optional in the reference)")
            for key, child in value.items():
                if key in node.keys:
                    self.value(child, node.keys[key], (*path, key), where)
                else:
                    self.add(False, where, (*path, key), "extra key")
        elif kind == "list" and node.items is not None:
            for child in value:
                self.value(child, node.items, (*path, "[]"), where)


# ------------------------------------------------------------------------------------- probes


@dataclass
class RouteReport:
    """What one probe saw (no values)."""

    name: str
    method: str
    route: str
    used_by_source: bool
    basis: str  # "live", "spec", "docs" or "none"
    status: int | None = None
    envelope: str | None = None
    expected_envelope: list[str] = field(default_factory=list)
    envelope_keys: dict[str, str] = field(default_factory=dict)
    items: int | None = None
    count: int | None = None
    seconds: float = 0.0
    attempts: int = 0
    throttled: int = 0
    shape: Any = None
    findings: list[Finding] = field(default_factory=list)


class _StatusRecorder(httpx.BaseTransport):
    """The network transport, noting the status of the last answer (the client keeps no status
    for a successful request)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.last: int | None = None
        self.sent = 0
        self.allowed = MAX_REQUESTS  # requests the current probe may still bring the total to

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.sent >= min(self.allowed, MAX_REQUESTS):
            # The client does not count a 429 as a retry: the hard bound is kept here.
            raise _AllowanceSpent(self.last)
        self.sent += 1
        response = self._inner.handle_request(request)
        self.last = response.status_code
        return response

    def close(self) -> None:
        self._inner.close()


class _AllowanceSpent(Exception):
    """A probe used its requests (1 + MAX_RETRIES): the transport sends no more (not an httpx
    error, so the client passes it through without a retry)."""

    def __init__(self, status: int | None) -> None:
        super().__init__(f"the probe's requests are spent (last answer: HTTP {status})")
        self.status = status


class _Stop(Exception):
    """A key, enterprise id or base URL problem: nothing more to probe (exit 2)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)


def _used_paths() -> set[str]:
    paths = {e.path for e in TABLES.values()}
    paths |= {LEGACY_DEVICES_PATH, V2_DEVICE_APPS_PATH, DATA_TAP_PATH}  # routes beside the tables
    paths.add(DATA_TAP_PATH + "/{id}")  # the job's status (sources/esper/tables/data_tap.py)
    return {_norm(p) for p in paths}


class Doctor:
    """Runs the probes through one client and keeps their reports."""

    def __init__(
        self, client: EsperClient, recorder: _StatusRecorder, limit: int, max_retries: int
    ) -> None:
        self.client, self.recorder, self.limit = client, recorder, limit
        self.reports: list[RouteReport] = []
        self.used = _used_paths()
        self.skipped: list[str] = []
        # A probe sends at most 1 + MAX_RETRIES requests: checked before it starts, the request
        # budget is never overrun; nor is the time budget by more than one probe's bound.
        self.attempts_per_probe = 1 + max_retries
        self.deadline = time.monotonic() + TIME_BUDGET_S

    def probe(
        self,
        name: str,
        template: str,
        table: str | None,
        params: Mapping[str, Any] | None = None,
        *,
        parent: str | None = None,
        method: str = "GET",
        body: Any = None,
        cursor: bool = False,
        first: bool = False,
    ) -> Any:
        """Request one route and compare its answer with the reference; the parsed body or None.

        Args:
            name: What the report calls the probe.
            template: The route with ``{eid}`` and ``{id}`` placeholders (shown as such).
            table: The raw table the route feeds (for the fields the source reads), if any.
            params: Query parameters.
            parent: The id that fills ``{id}`` (sent, never reported).
            cursor: The ``/v2/devices/`` cursor mode (its envelope has no live recording).
            first: A key/enterprise/base-URL failure here stops the probe (exit 2).
        """
        route = template
        if self.recorder.sent + self.attempts_per_probe > MAX_REQUESTS:
            self.skipped.append(f"{method} {route}: the request budget ({MAX_REQUESTS}) is spent")
            return None
        if time.monotonic() >= self.deadline:
            self.skipped.append(f"{method} {route}: the time budget ({TIME_BUDGET_S:g} s) is spent")
            return None
        if "{id}" in template and not parent:
            self.skipped.append(f"{method} {route}: no id to probe it with (its list was empty)")
            return None
        ref = reference(method, template, cursor=cursor)
        report, compare = _start(name, method, template, table, ref, cursor, self.used)
        self.reports.append(report)
        path = template.format(eid=self.client.enterprise_id, id=parent)
        before = self.client.totals()
        started = time.monotonic()
        self.recorder.allowed = self.recorder.sent + self.attempts_per_probe
        answer: Any = None
        try:
            if method == "POST":
                answer = self.client.post(path, body)
            else:
                answer = self.client.get(path, params)
            report.status = self.recorder.last
        except EsperError as error:
            report.status = error.status or self.recorder.last
            self._failed(error, compare, first)
        except _AllowanceSpent as spent:
            report.status = spent.status
            compare.add(
                True,
                "route",
                (),
                f"failed (HTTP {spent.status}) after {self.attempts_per_probe} requests",
            )
        finally:
            report.seconds = round(time.monotonic() - started, 3)
            after = self.client.totals()
            report.attempts = after.requests - before.requests
            report.throttled = after.throttled - before.throttled
            report.findings = compare.findings
        if answer is not None:
            _check_answer(answer, ref, report, compare)
            report.findings = compare.findings
        return answer

    def _failed(self, error: EsperError, compare: _Compare, first: bool) -> None:
        status = f"HTTP {error.status}" if error.status else type(error).__name__
        if not first and error.status in REFUSED_MEANING:
            # As a run: after the first two requests, a 403/404 skips one table (a partial run).
            compare.add(False, "route", (), f"{REFUSED} (HTTP {error.status})")
            return
        if isinstance(error, EsperAuthError | EsperConfigError):
            raise _Stop(
                f"{compare.route}: the API key was refused ({status})"
                if isinstance(error, EsperAuthError)
                else f"{compare.route}: configuration problem ({type(error).__name__})"
            )
        if isinstance(error, EsperNotFoundError):  # one of the first two requests
            raise _Stop(
                f"{compare.route} answered 404: the enterprise id or the base URL is probably wrong"
            )
        problem = (
            "answered a body that is not JSON"
            if isinstance(error, EsperResponseError)
            else f"failed ({status}) after retries"
        )
        compare.add(True, "route", (), problem)


REFUSED = "refused: a run would skip this table (partial run)"
REFUSED_MEANING = {
    403: "the key lacks the scope for it, or the tenant's plan or platform does not offer it",
    404: "the tenant's plan or platform does not offer it",
}


def _start(
    name: str,
    method: str,
    template: str,
    table: str | None,
    ref: Reference,
    cursor: bool,
    used_paths: set[str],
) -> tuple[RouteReport, _Compare]:
    used = _norm(template) in used_paths
    report = RouteReport(name, method, template, used, ref.basis)
    report.expected_envelope = sorted(families(ref.root))
    label = f"{method} {template}" + (" (cursor mode)" if cursor else "")
    return report, _Compare(
        label, used, read_paths(table, ref.record), required_paths(table, ref.record)
    )


def check(
    answer: Any, template: str, table: str | None, *, method: str = "GET", cursor: bool = False
) -> RouteReport:
    """Compare one parsed answer with the reference of its route, without any request.

    Args:
        answer: The parsed JSON body.
        template: The route, e.g. ``"/v2/devices/"`` or ``"/enterprise/{eid}/device/{id}/app/"``.
        table: The raw table the route feeds (for the fields the source reads), if any.
    """
    ref = reference(method, template, cursor=cursor)
    report, compare = _start(template, method, template, table, ref, cursor, _used_paths())
    _check_answer(answer, ref, report, compare)
    report.findings = compare.findings
    return report


def _check_answer(answer: Any, ref: Reference, report: RouteReport, compare: _Compare) -> None:
    root, record = ref.root, ref.record
    report.shape = shape_of(answer)
    found = families(answer)
    report.envelope = next(iter(found), None)
    if not isinstance(answer, dict):
        compare.add(True, "envelope", (), f"is {json_type(answer)}, expected an object")
        return
    envelope = answer
    if "results" not in answer and isinstance(answer.get("content"), dict):
        envelope = answer["content"]
    report.envelope_keys = {safe_key(k): json_type(v) for k, v in envelope.items()}
    if isinstance(envelope.get("count"), int):
        report.count = envelope["count"]
    is_list = "results" in envelope
    expected = set(report.expected_envelope)
    if expected and not found & expected:
        compare.add(
            True,
            "envelope",
            (),
            f"is {report.envelope}, expected {' or '.join(sorted(expected))}",
        )
    elif root is not None and is_list:
        _check_envelope(envelope, _envelope_node(root), compare)
    if is_list:
        results = envelope.get("results")
        report.items = len(results) if isinstance(results, list) else None
        if results is None and any(envelope.get(k) for k in ("count", "next", "has_more")):
            compare.add(True, "envelope", ("results",), "is null on a list that has items")
        try:
            parse_page(answer)
        except EsperResponseError:
            if not any(f.severity == BREAK for f in compare.findings):
                compare.add(True, "envelope", (), "rejected by the source's page reader")
        records = [r for r in results or [] if isinstance(r, dict)]
        where = "items"
    else:
        records = [envelope] if report.envelope in ("content-object", "bare-object") else []
        where = "record"
    if record is None:
        return
    for item in records:
        compare.value(item, record, (), where)


def _check_envelope(envelope: dict, node: Node, compare: _Compare) -> None:
    if node.keys is None:
        return
    for key in sorted(node.required - set(envelope)):
        compare.add(key in ENVELOPE_READS, "envelope", (key,), "missing key")
    for key, value in envelope.items():
        child = node.keys.get(key)
        if child is None:
            compare.add(False, "envelope", (key,), "extra key")
        elif key in _LINKS and value is None:
            continue  # a first or last page (live-observations.md, section 3)
        elif key != "results":  # the records are compared item by item
            compare.value(value, child, (key,), "envelope")


# ------------------------------------------------------------------------------- the sequence


def _first(body: Any, want: Callable[[dict], bool] = lambda item: True) -> dict | None:
    try:
        items = parse_page(body).items if body is not None else []
    except EsperResponseError:
        return None
    return next((i for i in items if want(i)), None)


def _id(item: dict | None, *names: str) -> str | None:
    for name in names:
        value = (item or {}).get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _probe_all(d: Doctor, data_tap_sql: str | None) -> None:
    e, lim = TABLES, d.limit
    page = {"limit": lim, "offset": 0}
    devices = d.probe("devices (offset)", e["devices"].path, "devices", page, first=True)
    d.probe("groups", e["groups"].path, "groups", page, first=True)
    cursor = d.probe(
        "devices (cursor)",
        e["devices"].path,
        "devices",
        {"cursor": "start", "limit": lim},
        cursor=True,
    )
    device = _first(devices) or _first(cursor)
    device_id = _id(device, "id")
    android = _first(devices, lambda i: apps_route(i) == "legacy") or device
    apple = _first(devices, lambda i: apps_route(i) == "v2") or device
    d.probe("device detail", "/v2/devices/{id}", "devices", parent=device_id)
    legacy_path = LEGACY_DEVICES_PATH
    d.probe("devices (legacy list)", legacy_path, "devices", page)
    d.probe("device apps (legacy)", e["device_apps"].path, "device_apps", page,
            parent=_id(android, "id"))  # fmt: skip
    d.probe("device apps (v2)", V2_DEVICE_APPS_PATH, "device_apps", page,
            parent=_id(apple, "id"))  # fmt: skip
    for parent_table, child_table in (
        ("blueprints", "blueprint_versions"),
        ("tenant_apps", "tenant_app_versions"),
        ("applications", "application_versions"),
    ):
        body = d.probe(parent_table, e[parent_table].path, parent_table, page)
        parent = _id(_first(body), "id")
        d.probe(child_table, e[child_table].path, child_table, page, parent=parent)
    v1 = d.probe("applications (v1)", "/v1/enterprise/{eid}/application/", "applications", page)
    v1_id = _id(_first(v1), "id")
    d.probe("application versions (v1)", "/v1/enterprise/{eid}/application/{id}/version/",
            "application_versions", page, parent=v1_id)  # fmt: skip
    commands = d.probe("command_requests", e["command_requests"].path, "command_requests", page)
    request_id = _id(_first(commands), "id")
    if request_id:
        d.probe("command_statuses", e["command_statuses"].path, "command_statuses",
                {"request": request_id, **page})  # fmt: skip
    else:
        d.skipped.append(f"GET {e['command_statuses'].path}: no command request to ask about")
    operations = d.probe(
        "operations", e["operations"].path, "operations", {"ordering": "-updated_at", **page}
    )
    operation_id = _id(_first(operations), "id")
    d.probe("operation_devices", e["operation_devices"].path, "operation_devices", page,
            parent=operation_id)  # fmt: skip
    now = d.client.server_time or datetime.now(UTC)
    window = {
        "last_seen_gt": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "last_seen_lt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **page,
    }
    d.probe("heartbeats", e["heartbeats"].path, "heartbeats", window)
    d.probe("device_events", e["device_events"].path, "device_events", page,
            parent=device_id)  # fmt: skip
    d.probe("status_metrics", e["status_metrics"].path, "status_metrics")
    if data_tap_sql is not None:
        _probe_data_tap(d, data_tap_sql)


def _probe_data_tap(d: Doctor, sql: str) -> None:
    """Submit one small query, then read its status a few times (about 1 s apart)."""
    body = {"query": sql, "is_download": False, "row_limit": 1, "latest_data": True}
    created = d.probe("data tap (submit)", DATA_TAP_PATH, None, method="POST", body=body)
    content = created.get("content") if isinstance(created, dict) else None
    query_id = _id(content if isinstance(content, dict) else None, "id")
    for attempt in range(5):  # the report keeps the last status read
        if not query_id:
            return
        if attempt:
            time.sleep(DATA_TAP_POLL_S)
            d.reports.pop()
        answer = d.probe("data tap (status)", DATA_TAP_PATH + "/{id}", None, parent=query_id)
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, dict) or content.get("status") not in ("PENDING", "RUNNING"):
            return


# ----------------------------------------------------------------------------------- the report


@dataclass
class Result:
    """The whole probe: its exit code, routes and findings (for the report and the tests)."""

    exit_code: int
    routes: list[RouteReport]
    requests: int
    retries: int
    throttled: int
    seconds: float
    stopped: str | None = None
    skipped: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.routes for f in r.findings]

    @property
    def refused(self) -> list[dict[str, Any]]:
        """The routes the key cannot read (403/404 after the first two requests): a run would
        skip their tables (a partial run), it would not break."""
        return [
            {
                "route": f"{r.method} {r.route}",
                "status": r.status,
                "meaning": REFUSED_MEANING.get(r.status or 0, ""),
                "used_by_source": r.used_by_source,
            }
            for r in self.routes
            if any(f.where == "route" and f.problem.startswith(REFUSED) for f in r.findings)
        ]

    def as_json(self) -> dict[str, Any]:
        verdict = {EXIT_OK: "ok", EXIT_CONFIG: "config", EXIT_DRIFT: "drift"}[self.exit_code]
        return {
            "tool": "esper-warehouse doctor",
            "verdict": verdict,
            "exit_code": self.exit_code,
            "stopped": self.stopped,
            "requests": self.requests,
            "retries": self.retries,
            "throttled": self.throttled,
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "refused": self.refused,
            "routes": [
                {
                    **{k: v for k, v in vars(r).items() if k != "findings"},
                    "findings": [vars(f) for f in r.findings],
                }
                for r in self.routes
            ],
        }


def render(result: Result) -> str:
    """The human report."""
    lines = [
        f"esper-warehouse doctor: {result.requests} requests, {result.retries} retries, "
        f"{result.throttled} throttled (429), {result.seconds:.1f} s",
        "",
        f"{'route':<62} {'status':>6}  {'envelope':<14} {'items':>5} {'count':>7} "
        f"{'seconds':>7}  {'basis':<5}  result",
    ]
    for r in result.routes:
        worst = (
            "BREAKS"
            if any(f.severity == BREAK for f in r.findings)
            else f"{len(r.findings)} notes"
            if r.findings
            else "ok"
        )
        used = "" if r.used_by_source else " (not read)"
        lines.append(
            f"{(r.method + ' ' + r.route + used)[:62]:<62} {r.status or '-':>6}  "
            f"{r.envelope or '-':<14} {_n(r.items):>5} {_n(r.count):>7} {r.seconds:>7.3f}  "
            f"{r.basis:<5}  {worst}"
        )
    breaks = [f for f in result.findings if f.severity == BREAK]
    notes = [f for f in result.findings if f.severity == NOTE and not f.problem.startswith(REFUSED)]
    if result.refused:
        lines += ["", "The key cannot read (a run would skip these tables: a partial run):"]
        lines += [f"  {r['route']}: HTTP {r['status']}, {r['meaning']}" for r in result.refused]
    if breaks:
        lines += ["", "Would break a run:"] + [f"  {f.text()}" for f in breaks]
    if notes:
        lines += ["", f"Notes ({len(notes)}; a run copes with these):"]
        lines += [f"  {f.text()}" for f in notes[: _MAX_NOTES_PER_ROUTE * 2]]
        if len(notes) > _MAX_NOTES_PER_ROUTE * 2:
            lines.append(f"  ... {len(notes) - _MAX_NOTES_PER_ROUTE * 2} more in the JSON report")
    if result.skipped:
        lines += ["", "Not probed:"]
        lines += [f"  {s}" for s in result.skipped]
    lines.append("")
    if result.stopped:
        lines.append(f"Stopped: {result.stopped} (exit {EXIT_CONFIG})")
    elif breaks:
        plural = "s" if len(breaks) != 1 else ""
        lines.append(
            f"Verdict: {len(breaks)} problem{plural} would break a run (exit {EXIT_DRIFT})."
        )
    else:
        lines.append("Verdict: nothing found that would break a run (exit 0).")
    return "\n".join(lines)


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def probe(
    base_url: str,
    api_key: str,
    enterprise_id: str,
    *,
    data_tap_sql: str | None = None,
    limit: int = PROBE_LIMIT,
    max_retries: int = MAX_RETRIES,
    timeout: float = REQUEST_TIMEOUT_S,
    sleep: Callable[[float], None] | None = None,
) -> Result:
    """Probe a tenant and return the result (nothing printed).

    Raises:
        EsperConfigError: A base URL or key the client refuses before sending anything.
    """
    started = time.monotonic()
    recorder = _StatusRecorder()
    client = EsperClient(
        base_url,
        api_key,
        enterprise_id,
        timeout=timeout,
        max_retries=max_retries,
        backoff_max=BACKOFF_MAX_S,
        max_retry_wait=MAX_RETRY_WAIT_S,
        sleep=sleep,
        initial_concurrency=1,
        min_concurrency=1,
        max_concurrency=1,
        transport=recorder,
        pace=False,  # one request at a time, within MAX_REQUESTS and TIME_BUDGET_S
    )
    d = Doctor(client, recorder, max(1, min(limit, 10)), max_retries)
    stopped = None
    try:
        _probe_all(d, data_tap_sql)
    except _Stop as stop:
        stopped = str(stop)
    finally:
        client.close()
    totals = client.totals()
    has_break = any(f.severity == BREAK for r in d.reports for f in r.findings)
    code = EXIT_CONFIG if stopped else EXIT_DRIFT if has_break else EXIT_OK
    return Result(
        code,
        d.reports,
        recorder.sent,  # requests that reached the wire (the client also counts refused ones)
        totals.retries,
        totals.throttled,
        time.monotonic() - started,
        stopped,
        d.skipped,
    )


def run(
    base_url: str | None,
    api_key: str | None,
    enterprise_id: str | None,
    *,
    json_path: Path | None = None,
    data_tap_sql: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The `doctor` command: probe, print the report, write the JSON; the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    missing = [
        name
        for name, value in (
            ("SOURCES__ESPER__BASE_URL", base_url),
            ("SOURCES__ESPER__API_KEY", api_key),
            ("SOURCES__ESPER__ENTERPRISE_ID", enterprise_id),
        )
        if not value
    ]
    if missing:
        print(f"doctor: missing configuration: {', '.join(missing)}", file=err)
        return EXIT_CONFIG
    try:
        result = probe(str(base_url), str(api_key), str(enterprise_id), data_tap_sql=data_tap_sql)
    except EsperConfigError as error:
        print(f"doctor: {error}", file=err)  # the client's texts never hold the key
        return EXIT_CONFIG
    print(_without(render(result), str(api_key)), file=out)
    if json_path is not None:
        text = json.dumps(result.as_json(), indent=2) + "\n"
        json_path.write_text(_without(text, str(api_key)))
        print(f"JSON report: {json_path}", file=out)
    return result.exit_code


def _without(text: str, secret: str) -> str:
    """The text with the API key masked: a last guard, the report already holds no values."""
    return text.replace(secret, "<api key>") if len(secret) >= 4 else text


def main(json_path: Path | None = None, data_tap_sql: str | None = None) -> int:
    """Read the source's settings the dlt way (environment, `.dlt/`) and run the probe."""
    import dlt

    return run(
        dlt.config.get("sources.esper.base_url"),
        dlt.secrets.get("sources.esper.api_key"),
        dlt.config.get("sources.esper.enterprise_id"),
        json_path=json_path,
        data_tap_sql=data_tap_sql,
    )
