"""The live Esper evidence (`docs/spec/live-shapes.json`) as test data.

`live-shapes.json` records what the real API answered as *type maps*: every leaf value replaced
by its Python type name, a list shown as its distinct element shapes, containers five levels
deep collapsed to ``"dict"``/``"list"`` (see its ``source.shape_notation``). The product reads
and compares with it in one place, `esper_warehouse.pipelines.shapes` (`shape_of`,
`shape_problems`); this module adds what only tests need: `routes` lists the recorded routes,
`route` finds one by its exact template, and `synthesize` turns a type map back into a JSON
value of that shape.
"""

from __future__ import annotations

from typing import Any

from esper_warehouse.pipelines.shapes import live_document

_SAMPLES: dict[str, Any] = {
    "str": "live-sample",
    "int": 1,
    "float": 1.5,
    "bool": True,
    "NoneType": None,
    "dict": {},
    "list": [],
}


def routes() -> list[dict[str, Any]]:
    """Every recorded live route (`n`, `method`, `path`, `query`, `observed`, `status`, ...)."""
    return list(live_document()["routes"])


def route(method: str, path: str) -> dict[str, Any]:
    """The recorded route with this method and path template (exactly as in the file: unlike
    doctor's `shapes.live_reference`, no placeholder matching and any status)."""
    for r in routes():
        if r["method"] == method and r["path"] == path:
            return r
    raise KeyError(f"{method} {path} is not in live-shapes.json")


def document() -> dict[str, Any]:
    """The whole evidence file (``client_practice``, ``docs_only``, ... included)."""
    return live_document()


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
