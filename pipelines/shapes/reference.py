"""The references an answer is compared with, and the notation of shapes.

Two documents, found with `data_path` (a checkout and an installed wheel alike):

* `docs/spec/live-shapes.json`: what the real API answered, as type maps (every leaf a Python
  type name, a list its distinct element shapes, containers five levels deep collapsed to
  ``"dict"``/``"list"``), plus the documented shapes of routes with no live sample (``docs_only``);
* `docs/spec/esper-openapi-subset.json`: the OpenAPI subset, read as Esper wrote it here (its
  known errors are patched for the strict checks only: `openapi.py`).

A reference is a `Node`: an expected JSON value, merged over every variant the document shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from esper_warehouse import data_path

SPEC_DIR = data_path("docs", "spec")
LIVE_SHAPES = SPEC_DIR / "live-shapes.json"
OPENAPI = SPEC_DIR / "esper-openapi-subset.json"
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


@dataclass
class Node:
    """An expected JSON value, merged over every variant the reference shows.

    Attributes:
        types: JSON types seen (``object list string integer number boolean null``); empty = any.
        keys: An object's keys; None when the reference does not show them (``{}``, ``"dict"``).
        required: Keys present in every object variant.
        items: A list's element; None when the reference does not show one (``[]``, null).
        seen: Whether an answer was seen with this value (the live recordings) or it is only
            documented (the OpenAPI subset, whose nullability is incomplete).
    """

    types: set[str] = field(default_factory=set)
    keys: dict[str, Node] | None = None
    required: set[str] = field(default_factory=set)
    items: Node | None = None
    seen: bool = True  # False: only documented (the OpenAPI subset), no answer was seen holding it


def merge(a: Node | None, b: Node | None) -> Node | None:
    """Two variants of a value as one expectation (a key is required only if both have it)."""
    if a is None or b is None:
        return a or b
    out = Node(a.types | b.types, seen=a.seen or b.seen)
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
    node.seen = False
    return node


def widen(live: Node | None, spec: Node | None) -> Node | None:
    """A live record that also knows what the spec documents at the same place.

    The live sample is one record or three: a key the spec documents there is no surprise when a
    tenant serves it (it is compared with the spec), and a value the spec declares nullable may
    be null. What the live sample holds stays required.
    """
    if live is None or spec is None:
        return live or spec
    out = Node(set(live.types), None, set(live.required), live.items, live.seen)
    if "null" in spec.types:
        out.types.add("null")
    if live.keys is not None:
        out.keys = dict(live.keys)
        for key, child in (spec.keys or {}).items():
            out.keys[key] = widen(live.keys[key], child) if key in live.keys else child  # type: ignore[assignment]
    if live.items is not None:
        out.items = widen(live.items, spec.items)
    return out


@cache
def live_document() -> dict[str, Any]:
    """The whole live evidence file (``routes``, ``docs_only``, ``client_practice``, ...).

    Shared and cached: callers read it, never change it.
    """
    return json.loads(LIVE_SHAPES.read_text())  # type: ignore[no-any-return]


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI subset as the file holds it (shared and cached: read it, never change it)."""
    return json.loads(OPENAPI.read_text())  # type: ignore[no-any-return]


def norm_path(path: str) -> str:
    """A route template with every placeholder spelt ``{}`` and no trailing slash, so that
    ``/enterprise/{enterprise_id}/device/`` and ``/enterprise/{eid}/device`` are one route."""
    return _PLACEHOLDER.sub("{}", path).rstrip("/")


def live_reference(method: str, path: str) -> Node | None:
    """The live recording of a route (answered 200), or None when there is none."""
    for route in live_document()["routes"]:
        if (
            route["method"] == method
            and norm_path(route["path"]) == norm_path(path)
            and route.get("status") == 200
        ):
            return from_live(route["observed"])
    return None


def docs_reference(method: str, path: str) -> Node | None:
    """The documented shape of a route with no live recording (Data Tap), or None."""
    for doc in live_document().get("docs_only", ()):
        for route in doc.get("routes", ()):
            if route["method"] == method and norm_path(route["path"]) == norm_path(path):
                return _documented(from_live(route["response_shape"]))
    return None


def _documented(node: Node | None) -> Node | None:
    """The node (and all below it) marked as documented, not seen in an answer."""
    if node is not None:
        node.seen = False
        for child in [*(node.keys or {}).values(), node.items]:
            _documented(child)
    return node


def spec_reference(method: str, path: str) -> Node | None:
    """The OpenAPI subset's 200 answer of a route, or None."""
    doc = openapi_document()
    for spec_path, ops in doc["paths"].items():
        if norm_path(spec_path) != norm_path(path):
            continue
        answer = ops.get(method.lower(), {}).get("responses", {})
        answer = answer.get("200") or answer.get("201") or {}
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        return from_spec(schema, doc) if schema else None
    return None


# The live device records (routes 12 and 15) are of one Android device (docs/spec/README.md):
# a device of another platform is compared with the spec's schema for its platform.
LIVE_DEVICE_PLATFORM = "ANDROID"
PLATFORM = "platform"  # the key whose value picks a record's schema among the spec's variants


# Where a route's reference comes from, best first (docs/guide/real-tenant.md's `doctor` paragraph names each):
# a live recording, Esper's documented shape, the OpenAPI subset, or nothing to compare with.
BASES = ("live", "docs", "spec", "none")


@dataclass
class Reference:
    """What a route's answer is compared with, and where that came from.

    Attributes:
        root: The whole answer's reference.
        record: A record's: the live sample widened with the spec (`widen`), else the spec's.
        basis: One of `BASES`.
        variants: The spec's record schema per `PLATFORM` value, where the spec gives one per
            platform (the device routes); a record of a platform the live sample is not of is
            compared with its own.
        live_record: Whether `record` holds a live sample (also the cursor mode's, whose
            envelope has none).
    """

    root: Node | None
    record: Node | None
    basis: str
    variants: dict[str, Node] = field(default_factory=dict)
    live_record: bool = False

    def record_for(self, item: Mapping[str, Any]) -> Node | None:
        """The reference of one record, by its platform where the spec tells them apart."""
        platform = item.get(PLATFORM)
        variant = self.variants.get(platform) if isinstance(platform, str) else None
        if variant is None or (self.live_record and platform == LIVE_DEVICE_PLATFORM):
            return widen(self.record, variant) if variant is not None else self.record
        return variant


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
    basis = next(b for b, found in zip(BASES, (live, docs, spec, True), strict=True) if found)
    live_records = live or (live_reference(method, template) if cursor else None)
    records = live_records or docs
    record = widen(record_node(records), record_node(spec)) if records else record_node(spec)
    documented = documented_keys(method, template)
    if record is not None and record.keys is not None and documented:
        record.keys = {**documented, **record.keys}
    variants = _platform_variants(method, template)
    return Reference(root, record, basis, variants, live_records is not None)


def documented_keys(method: str, template: str) -> dict[str, Node]:
    """Record keys documented beyond the OpenAPI subset and the live samples, per route: compared
    as documented (of any type listed, never required)."""
    route = (method, norm_path(template))
    if route == ("GET", "/v0/operations"):
        # service-interface.md, "GET /v0/operations/": "Each item has optional `alias`."
        return {"alias": Node({"string", "null"}, seen=False)}
    if route == ("GET", "/v2/devices/{}/device-apps"):
        # live-observations.md §9: Esper's own tool reads Apple apps from this route, by the
        # fields live-shapes.json names in `client_practice.fields_read.apple_app`.
        fields = live_document()["client_practice"]["fields_read"]["apple_app"]
        return {name: Node(seen=False) for name in fields}
    return {}


def _platform_variants(method: str, template: str) -> dict[str, Node]:
    """The spec's record schemas of a route keyed by their one `PLATFORM` value (the oneOf of
    `AndroidDeviceV2`, `AppleDeviceV2`, ...); empty where the spec has no such variants."""
    doc = openapi_document()
    for spec_path, ops in doc["paths"].items():
        if norm_path(spec_path) != norm_path(template):
            continue
        answer = ops.get(method.lower(), {}).get("responses", {})
        answer = answer.get("200") or answer.get("201") or {}
        schema = answer.get("content", {}).get("application/json", {}).get("schema") or {}
        found: dict[str, Node] = {}
        for variant in _record_variants(schema, doc):
            enum = variant.get("properties", {}).get(PLATFORM, {}).get("enum", ())
            if len(enum) == 1:
                found[enum[0]] = from_spec(variant, doc)
        return found
    return {}


def _record_variants(schema: Mapping[str, Any], doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The oneOf alternatives where an answer's records sit (list items or the content object),
    each resolved from its ``$ref``."""

    def resolve(node: Mapping[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = doc["components"]["schemas"][str(node["$ref"]).rsplit("/", 1)[-1]]
        return dict(node)

    out: list[dict[str, Any]] = []
    content = resolve(schema).get("properties", {}).get("content")
    for holder in [resolve(content)] if content else []:
        for alt in [holder] + [resolve(v) for v in holder.get("oneOf", ())]:
            items = resolve(alt).get("properties", {}).get("results", {}).get("items")
            out += [resolve(v) for v in (resolve(items) if items else alt).get("oneOf", ())]
    return out


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


def envelope_node(root: Node) -> Node:
    """The object that holds a list's ``results`` (``content`` in a content envelope)."""
    content = (root.keys or {}).get("content")
    return content if content is not None and "results" not in (root.keys or {}) else root


def record_node(root: Node | None) -> Node | None:
    """Where the records sit in a reference: list items, the content object, or the root."""
    if root is None:
        return None
    envelope = envelope_node(root)
    results = (envelope.keys or {}).get("results")
    if results is not None:
        return results.items
    return envelope


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


def shape_of(
    value: Any, *, max_depth: int | None = None, key: Callable[[str], str] | None = None
) -> Any:
    """The type map of a JSON value, in live-shapes.json's notation (lists: distinct shapes).

    Args:
        value: A parsed JSON value.
        max_depth: Containers this deep are shown as ``"dict"``/``"list"``, as the recorder of
            live-shapes.json did (doctor: 5); None shows every level (the simulator tests).
        key: How a key is shown (doctor hides the keys it does not know); None shows it as is.
    """
    return _shape(value, 0, max_depth, key)


def _shape(value: Any, depth: int, max_depth: int | None, key: Callable[[str], str] | None) -> Any:
    if isinstance(value, dict):
        if max_depth is not None and depth >= max_depth:
            return "dict"
        return {
            (key(k) if key else k): _shape(v, depth + 1, max_depth, key) for k, v in value.items()
        }
    if isinstance(value, list):
        if max_depth is not None and depth >= max_depth:
            return "list"
        shapes: list[Any] = []
        seen: set[str] = set()  # one canonical text per shape: linear in the body
        for item in value:
            s = _shape(item, depth + 1, max_depth, key)
            text = json.dumps(s, sort_keys=True)
            if text not in seen:
                seen.add(text)
                shapes.append(s)
        return shapes
    return type(value).__name__
