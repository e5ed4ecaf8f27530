"""Validate simulator responses against the OpenAPI subsets with the JSON Schema validator.

Which schema an answer must match, and the subset's known quirks patched, are the product's
(`esper_warehouse.pipelines.shapes`, `openapi.py`, quirks 1-6 named there); this module only runs
jsonschema (a test dependency) over them. The Esper Pipelines subset
(`docs/spec/esper-pipelines-v0-subset.json`, read by no product module yet) is read here, with
its own quirks patched in `pipelines_subset` (named in docs/spec/README.md, "Esper Pipelines").
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from esper_warehouse.pipelines.shapes import (
    FAMILY_ERRORS,
    datatap_schema,
    patched_subset,
    pointer,
    response_schema,
)
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

URI = "urn:esper-openapi-subset"
PIPELINES_URI = "urn:esper-pipelines-v0-subset"
PIPELINES_SUBSET = Path(__file__).resolve().parents[2] / "docs/spec/esper-pipelines-v0-subset.json"


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


@functools.cache
def pipelines_subset() -> dict[str, Any]:
    """The Pipelines subset with its quirks patched (docs/spec/README.md, "Esper Pipelines"):

    P1. ``next``/``previous`` are plain strings, though the last page has no next page: nullable.
    P2. A run's ``started_at``/``ended_at``, a target run's command fields and timestamps are
        strings with no value before they happen: nullable (unset fields are null on the live
        commands routes, live-observations.md section 5).
    P3. A target run's ``device_alias`` says ``format: uuid``, but the same file's bulk-add example
        gives an alias as ``"Actineon Edge 10A"``: a name, nullable as a device's alias is.
    """
    doc = json.loads(PIPELINES_SUBSET.read_text())
    for item in doc["paths"].values():
        content = item["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        inner = content["properties"]["content"].get("properties", {})
        for name in ("next", "previous"):
            if name in inner:
                inner[name] = _nullable(inner[name])
    schemas = doc["components"]["schemas"]
    nullable = {
        "PipelineRun": ("started_at", "ended_at"),
        "StageRun": ("ended_at",),
        "TargetRun": ("started_at", "ended_at", "command_id", "command_status"),
        "Target": ("device_alias",),
    }
    for name, props in nullable.items():
        for prop in props:
            schemas[name]["properties"][prop] = _nullable(schemas[name]["properties"][prop])
    schemas["TargetRun"]["properties"]["device_alias"] = _nullable({"type": "string"})
    return doc


@functools.cache
def _registry() -> Registry:
    return Registry().with_resources(
        [
            (URI, Resource(contents=patched_subset(), specification=DRAFT202012)),
            (PIPELINES_URI, Resource(contents=pipelines_subset(), specification=DRAFT202012)),
        ]
    )


def validate_ref(ref: str, body: Any, uri: str = URI) -> None:
    """Validate ``body`` against the schema at ``ref`` (a ``#/...`` pointer into the subset
    named by ``uri``)."""
    validator = Draft202012Validator(
        {"$ref": f"{uri}{ref}"},
        registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = "/".join(map(str, e.absolute_path))
        raise AssertionError(f"{len(errors)} schema error(s); first at {where!r}: {e.message}")


def validate_response(
    template: str, status: int, body: Any, family: str, method: str = "get"
) -> None:
    """Validate a response of the path ``template`` (as in the subset) with ``status``
    (arguments: `shapes.response_schema`); an undocumented error also carries its status."""
    ref = response_schema(template, status, family, method)
    if ref is None:
        raise AssertionError(f"{method.upper()} {template} documents no {status} response")
    validate_ref(ref, body)
    if ref in FAMILY_ERRORS.values():  # quirk 4: an error status the path does not document
        assert body.get("status", body.get("code")) == status


def validate_datatap(body: Any) -> None:
    """Quirk 5: Data Tap bodies against the Reports shapes they are modelled on."""
    validate_ref(datatap_schema(body), body)


def validate_pipelines(template: str, status: int, body: Any) -> None:
    """Validate a response of the Pipelines subset's path ``template`` with ``status``: the
    documented response, else (an error the path does not document: 400, 403, 404) the spec's
    error body, ``{code, message, content}`` with ``code`` the status."""
    responses = pipelines_subset()["paths"][template]["get"]["responses"]
    if str(status) in responses:
        where = ("paths", template, "get", "responses", str(status), "content")
        validate_ref(pointer(*where, "application/json", "schema"), body, PIPELINES_URI)
        return
    assert status >= 400, f"GET {template} documents no {status} response"
    validate_ref("#/components/schemas/Error_400_Bad_Data", body, PIPELINES_URI)
    assert body["code"] == status, body
