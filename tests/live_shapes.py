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
