"""doctor's comparison: one answer against its route's reference, as findings with a severity.

Lenient where a small sample proves little, strict where a run would break: a missing table key
or cursor (every other column is nullable), a type change on the path of a field the source
reads, an envelope family other than the reference's or a page the source's reader rejects
**breaks**; an extra key, a null where a value was seen, anything else is a **note** (see
`pipelines/views/doctor/__init__.py` and docs/decisions.md, "doctor"). Findings hold no values: key
names pass the allowlist `known_keys` or are shown as ``<unknown key>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from esper_warehouse.sources.esper.http import EsperResponseError
from esper_warehouse.sources.esper.http.paginators import parse_page
from esper_warehouse.sources.esper.tables import TABLES

from .conform import FREE_FORM
from .reference import (
    Node,
    Reference,
    envelope_node,
    families,
    json_type,
    live_document,
    openapi_document,
    shape_of,
)

# What the paginators read from a list envelope (`sources/esper/http/paginators.py`, `parse_page`).
ENVELOPE_READS = frozenset({"results", "count", "next", "next_cursor", "has_more"})
BREAK, NOTE = "break", "note"
# a record a run sets aside (its table kept as loaded, or loaded without it: a partial run)
SET_ASIDE = "set aside"
LINKS = frozenset({"next", "prev", "previous", "next_cursor", "prev_cursor"})
SHAPE_DEPTH = 5  # containers deeper than this are shown as "object"/"list" (as live-shapes.json)
UNKNOWN_KEY = "<unknown key>"  # what the report shows for a key not in `known_keys()`


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
    names: set[str] = set(ENVELOPE_READS | LINKS)
    live = live_document()
    for route in live["routes"]:
        _keys_of(route.get("observed"), names)
    for doc in live.get("docs_only", ()):
        for route in doc.get("routes", ()):
            _keys_of(route.get("response_shape"), names)
    for fields in live["client_practice"]["fields_read"].values():
        names |= {str(name) for name in fields}
    for schema in _walk_properties(openapi_document()):
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


def report_shape(value: Any) -> Any:
    """The type map of an answer, in live-shapes.json's notation, with unsafe keys hidden."""
    return shape_of(value, max_depth=SHAPE_DEPTH, key=safe_key)


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


def _free_form(path: tuple[str, ...]) -> bool:
    """An object whose keys vary record by record (`conform.FREE_FORM`): its keys are not
    compared (live route 27: a command's arguments are its own)."""
    return bool(path) and f".{path[-1]}" in FREE_FORM


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


class Compare:
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
        self.outcome: str | None = None  # a request that stopped the probe: what it answered
        self._seen: set[tuple[str, str, str]] = set()

    def add(self, breaks: bool, where: str, path: tuple[str, ...], problem: str) -> None:
        self._add(BREAK if breaks and self.used else NOTE, where, path, problem)

    def set_aside(self, where: str, path: tuple[str, ...]) -> None:
        """A record without its table's key or cursor: a run sets it aside (partial)."""
        self._add(SET_ASIDE if self.used else NOTE, where, path, "missing key")

    def _add(self, severity: str, where: str, path: tuple[str, ...], problem: str) -> None:
        name = ".".join(safe_key(p) if p != "[]" else "[]" for p in path).replace(".[]", "[]")
        if (where, name, problem) in self._seen:
            return
        self._seen.add((where, name, problem))
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
                if node.seen:  # a null where an answer showed a value; the spec's are incomplete
                    self.add(False, where, path, f"is null, the reference shows {expected}")
            elif node.types != {"null"}:  # only nulls seen: no proof of "never a value"
                # A run reads a value of another type as NULL and counts it (`arrow.Unreadable`):
                # only a key or cursor breaks it.
                self.add(self._is_required(path), where, path, f"is {kind}, expected {expected}")
            return
        if kind == "object" and node.keys is not None and not _free_form(path):
            for key in sorted(node.required - set(value)):
                # Only a key or cursor the run needs sets the record aside: other columns are
                # nullable.
                if self._is_required((*path, key)):
                    self.set_aside(where, (*path, key))
                else:
                    self.add(False, where, (*path, key), "missing key")
            for key in sorted(set(node.keys) - node.required - set(value)):
                if self._is_required((*path, key)):
                    # a table's key or cursor, however the reference shows it: a run sets the
                    # record aside, naming `table.column` (`Table.keyed`, exit 6)
                    self.set_aside(where, (*path, key))
                    continue
                # A key only the spec adds to a live sample is no evidence that it is served.
                documented_only = node.seen and not node.keys[key].seen
                if self._is_read((*path, key)) and not documented_only:
                    self.add(False, where, (*path, key), "missing key (optional in the reference)")
            for key, child in value.items():
                if key in node.keys:
                    self.value(child, node.keys[key], (*path, key), where)
                else:
                    self.add(False, where, (*path, key), "extra key")
        elif kind == "list" and node.items is not None:
            for child in value:
                self.value(child, node.items, (*path, "[]"), where)


@dataclass
class Seen:
    """What an answer showed, beside its findings (no values)."""

    shape: Any = None
    envelope: str | None = None
    envelope_keys: dict[str, str] = field(default_factory=dict)
    items: int | None = None
    count: int | None = None


def check_answer(answer: Any, ref: Reference, compare: Compare) -> Seen:
    """Compare one parsed answer with its reference: findings go to ``compare``; what the
    answer showed (shape, envelope family and keys, items, count) is returned."""
    root, record = ref.root, ref.record
    seen = Seen(report_shape(answer))
    found = families(answer)
    seen.envelope = next(iter(found), None)
    if isinstance(answer, list) and "list" in (families(root) or {"list"}):
        # A list answered whole as a bare array (authz2 role scopes): its items are the records.
        seen.items = len(answer)
        if not all(isinstance(item, dict) for item in answer):
            compare.add(True, "envelope", (), "is a list holding something other than objects")
        for item in answer if record is not None else ():
            if isinstance(item, dict):
                compare.value(item, ref.record_for(item) or record, (), "items")
        return seen
    if not isinstance(answer, dict):
        compare.add(True, "envelope", (), f"is {json_type(answer)}, expected an object")
        return seen
    envelope = answer
    if "results" not in answer and isinstance(answer.get("content"), dict):
        envelope = answer["content"]
    seen.envelope_keys = {safe_key(k): json_type(v) for k, v in envelope.items()}
    if isinstance(envelope.get("count"), int):
        seen.count = envelope["count"]
    is_list = "results" in envelope
    expected = families(root)
    if expected and not found & expected:
        compare.add(
            True,
            "envelope",
            (),
            f"is {seen.envelope}, expected {' or '.join(sorted(expected))}",
        )
    elif root is not None and is_list:
        _check_envelope(envelope, envelope_node(root), compare)
    if is_list:
        results = envelope.get("results")
        seen.items = len(results) if isinstance(results, list) else None
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
        records = [envelope] if seen.envelope in ("content-object", "bare-object") else []
        where = "record"
    if record is None:
        return seen
    for item in records:
        compare.value(item, ref.record_for(item) or record, (), where)
    return seen


def _check_envelope(envelope: dict, node: Node, compare: Compare) -> None:
    if node.keys is None:
        return
    for key in sorted(node.required - set(envelope)):
        compare.add(key in ENVELOPE_READS, "envelope", (key,), "missing key")
    for key, value in envelope.items():
        child = node.keys.get(key)
        if child is None:
            compare.add(False, "envelope", (key,), "extra key")
        elif key in LINKS and value is None:
            continue  # a first or last page (live-observations.md, section 3)
        elif key != "results":  # the records are compared item by item
            compare.value(value, child, (key,), "envelope")
