"""The live Esper evidence (`docs/spec/live-shapes.json`) as test data.

`live-shapes.json` records what the real API answered as *type maps*: every leaf value replaced
by its Python type name, a list shown as its distinct element shapes, containers five levels
deep collapsed to ``"dict"``/``"list"`` (see its ``source.shape_notation``). This module is the
one place that reads it for tests: `routes` lists the recorded routes, `synthesize` turns a type
map back into a JSON value of that shape, and `shape_of` goes the other way, so a simulator
answer can be compared with the live one.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

LIVE_SHAPES = Path(__file__).resolve().parent.parent / "docs" / "spec" / "live-shapes.json"

_SAMPLES: dict[str, Any] = {
    "str": "live-sample",
    "int": 1,
    "float": 1.5,
    "bool": True,
    "NoneType": None,
    "dict": {},
    "list": [],
}


@cache
def _document() -> dict[str, Any]:
    return json.loads(LIVE_SHAPES.read_text())


def routes() -> list[dict[str, Any]]:
    """Every recorded live route (`n`, `method`, `path`, `query`, `observed`, `status`, ...)."""
    return list(_document()["routes"])


def route(method: str, path: str) -> dict[str, Any]:
    """The recorded route with this method and path template (exactly as in the file)."""
    for r in routes():
        if r["method"] == method and r["path"] == path:
            return r
    raise KeyError(f"{method} {path} is not in live-shapes.json")


def document() -> dict[str, Any]:
    """The whole evidence file (``client_practice``, ``docs_only``, ... included)."""
    return _document()


def synthesize(observed: Any) -> Any:
    """A JSON value with the recorded shape: ``"str"`` -> a string, ``[a, b]`` -> one item each.

    A list of several element shapes yields one element of each shape, so every variant the
    live API showed (an item with and one without ``auto_update_mode``, say) is exercised.
    """
    if isinstance(observed, str):
        if observed not in _SAMPLES:
            raise ValueError(f"unknown type name in live-shapes.json: {observed!r}")
        value = _SAMPLES[observed]
        return type(value)() if isinstance(value, dict | list) else value
    if isinstance(observed, dict):
        return {k: synthesize(v) for k, v in observed.items()}
    if isinstance(observed, list):
        return [synthesize(v) for v in observed]
    raise ValueError(f"unexpected shape node: {observed!r}")


def shape_of(value: Any) -> Any:
    """The type map of a JSON value, in live-shapes.json's notation (lists: distinct shapes)."""
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes: list[Any] = []
        for item in value:
            s = shape_of(item)
            if s not in shapes:
                shapes.append(s)
        return shapes
    if value is None:
        return "NoneType"
    return type(value).__name__


# Objects whose keys vary record by record (live route 27: "command_args keys vary"): compared as
# objects, not key by key.
FREE_FORM = (".command_args",)


def shape_problems(live: Any, sim: Any, where: str, extras: list[str]) -> list[str]:
    """Where `sim` (a shape) fails `live` (a shape); extra sim keys are appended to `extras`.

    Null either side is compatible (a sample of three rows is no proof of "always null"); a live
    list's item variants are merged (keys present in every variant are required).
    """
    if where.endswith(FREE_FORM):
        return [] if isinstance(sim, dict) or sim == "NoneType" else [f"{where}: not an object"]
    if live == "NoneType" or sim == "NoneType":
        return []  # null either side: compatible (the sample is small)
    if live in ("dict", "list"):  # a container collapsed by the recorder (five levels deep)
        ok = isinstance(sim, dict) if live == "dict" else isinstance(sim, list)
        return [] if ok else [f"{where}: {sim!r}, expected {live}"]
    if isinstance(live, str):
        return [] if sim == live else [f"{where}: {sim!r}, expected {live}"]
    if isinstance(live, dict):
        if not isinstance(sim, dict):
            return [f"{where}: {type(sim).__name__ if not isinstance(sim, str) else sim}, "
                    "expected an object"]  # fmt: skip
        if not live:
            return []  # an empty object was recorded: nothing to compare
        problems = [f"{where}.{k}: missing" for k in live if k not in sim]
        extras.extend(f"{where}.{k}" for k in sim if k not in live)
        for k in live:
            if k in sim:
                problems += shape_problems(live[k], sim[k], f"{where}.{k}", extras)
        return problems
    if isinstance(live, list):
        if not isinstance(sim, list):
            return [f"{where}: {sim!r}, expected a list"]
        if not live or not sim:
            return []
        problems = []
        merged = _required_union(live)
        for item in sim:
            problems += shape_problems(merged, item, f"{where}[]", extras)
        return sorted(set(problems))
    raise AssertionError(f"unexpected shape node at {where}: {live!r}")


def _required_union(variants: list[Any]) -> Any:
    """The live list item variants as one shape: keys in every variant, types from the first."""
    if not all(isinstance(v, dict) for v in variants):
        return variants[0]
    keys = set.intersection(*(set(v) for v in variants))
    return {k: variants[0][k] for k in variants[0] if k in keys}
