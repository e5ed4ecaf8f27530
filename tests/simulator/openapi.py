"""Validate simulator responses against the OpenAPI subset with the JSON Schema validator.

Which schema an answer must match, and the subset's known quirks patched, are the product's
(`esper_warehouse.pipelines.shapes`, `openapi.py`, quirks 1-6 named there); this module only runs
jsonschema (a test dependency) over them.
"""

from __future__ import annotations

import functools
from typing import Any

from esper_warehouse.pipelines.shapes import (
    FAMILY_ERRORS,
    datatap_schema,
    patched_subset,
    response_schema,
)
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

URI = "urn:esper-openapi-subset"


@functools.cache
def _registry() -> Registry:
    return Registry().with_resource(
        URI, Resource(contents=patched_subset(), specification=DRAFT202012)
    )


def validate_ref(ref: str, body: Any) -> None:
    """Validate ``body`` against the schema at ``ref`` (a ``#/...`` pointer into the subset)."""
    validator = Draft202012Validator(
        {"$ref": f"{URI}{ref}"},
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
