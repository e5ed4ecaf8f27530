"""The OpenAPI subset with its known quirks patched, for the strict (JSON Schema) checks.

The subset is copied from Esper's own files and is not fixed there; the few places where a
literal reading rejects what the API really sends are patched here, each one named. This module
says which schema an answer must match (`response_schema`, `datatap_schema`); the simulator tests
run the JSON Schema validator over it (`tests/simulator/openapi.py`: jsonschema is a test
dependency, not the product's). doctor reads the file unpatched (`reference.py`): it compares
with the live shape first and takes a null where the subset shows a value as a note.

1. ``/v2/devices/`` 200 is ``content.oneOf [Offset, Cursor]`` with no required fields, so both
   branches match every body: the branch is picked by the body (``next_cursor`` present ->
   cursor list, else offset list) through an if/then/else.
2. ``next``/``previous``/``prev`` are plain ``string`` in the v0/v2/commands/operations list
   schemas (and ``DeviceLastSeen``), though the last page carries ``null``: made nullable there.
3. ``DeviceGroup.parent`` is a non-nullable URL, but the root group has no parent: nullable.
4. Error statuses a path does not document (e.g. 400 on ``/commands/v0/status/``) are checked
   against the route family's error schema (legacy ``ErrorResponse``, v0/v2 ``Error_*``,
   Reports ``ReportsErrorResponse``).
5. Data Tap is not in the subset: its bodies are checked loosely against the Reports shapes
   (``CreateReportResponse``, ``GetReportResponsePreview``) here, and key for key against the
   documented Query API shape in ``tests/simulator/test_datatap.py``.
6. Where the live evidence (docs/spec/live-observations.md, the highest authority) contradicts the
   subset, the live shape wins: foundation version numbers are ints and
   ``internal_storage_binary_prefix`` a bool (section 4); ``foundation_info``, ``group_id``,
   ``mqtt_topic`` may be null (section 4); a device command's ``groups``, ``schedule_args``,
   ``reason``, ``alias`` are null when unset (section 5); an empty v2 list is ``results: null``
   (section 2); the commands routes say ``prev`` (section 1); the patch level is spelt
   ``security_patch_level`` (section 4; the subset's ``security_path_level`` is a typo); the
   legacy device record's ``policy``, ``user``, ``tags``, ``template_name``... are null (routes
   11, 14); Apple device apps include App Store apps (``VPP``) with no app or version id
   (section 9); a command status without a reason says ``reason: null`` (route 29).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from .reference import openapi_document

FAMILY_ERRORS = {
    "legacy": "#/components/schemas/ErrorResponse",
    "v2": "#/components/schemas/Error_400_Bad_Data",
    "reports": "#/components/schemas/ReportsErrorResponse",
}


def _nullable_links(schema: Any) -> None:
    """Quirk 2: make string next/previous/prev properties nullable, recursively."""
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for name in ("next", "previous", "prev"):
                p = props.get(name)
                if isinstance(p, dict) and p.get("type") == "string":
                    p["type"] = ["string", "null"]
        for v in schema.values():
            _nullable_links(v)
    elif isinstance(schema, list):
        for v in schema:
            _nullable_links(v)


@functools.cache
def patched_subset() -> dict[str, Any]:
    """The subset with the quirks above patched (a copy: doctor's unpatched one is unchanged)."""
    doc = copy.deepcopy(openapi_document())
    paths = doc["paths"]
    # quirk 1
    content = paths["/v2/devices/"]["get"]["responses"]["200"]["content"]["application/json"]
    branches = content["schema"]["properties"]["content"].pop("oneOf")
    content["schema"]["properties"]["content"].update(
        {"if": {"required": ["next_cursor"]}, "then": branches[1], "else": branches[0]}
    )
    # quirk 2
    for item in paths.values():
        for op in item.values():
            if isinstance(op, dict) and "responses" in op:
                _nullable_links(op["responses"].get("200", {}))
    _nullable_links(doc["components"]["schemas"]["DeviceLastSeen"])
    # quirk 3
    doc["components"]["schemas"]["DeviceGroup"]["properties"]["parent"]["type"] = [
        "string",
        "null",
    ]
    _live_wins(doc)
    return doc


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _live_wins(doc: dict[str, Any]) -> None:
    """Quirk 6: the live evidence over the subset, fact by fact (see the module docstring)."""
    schemas = doc["components"]["schemas"]
    for name in ("major_version", "minor_version", "build_number"):
        schemas["FoundationInfo"]["properties"][name]["type"] = "integer"
    schemas["MemoryInfo"]["properties"]["internal_storage_binary_prefix"]["type"] = "boolean"
    software = schemas["SoftwareInfo"]["properties"]
    software["security_patch_level"] = software.pop("security_path_level")
    software["foundation_info"] = _nullable(software["foundation_info"])
    for device in ("AndroidDeviceV2", "AppleDeviceV2", "LinuxDeviceV2", "WindowsDeviceV2"):
        props = schemas[device]["properties"]
        for name in ("group_id", "mqtt_topic"):
            if name in props:
                props[name] = _nullable(props[name])
    # the legacy device record (live routes 11, 14): these were null on the live tenant
    legacy = schemas["DeviceInfo"]["properties"]
    for name in (
        "policy",
        "policy_name",
        "current_command",
        "user",
        "tags",
        "template_name",
        "audioConstraints",
        "kiosk_app_name",
        "emm_device",
    ):
        if name in legacy:
            legacy[name] = _nullable(legacy[name])
    # Apple apps outside the tenant list (live §9): App Store (VPP) apps, no app/version id
    apps = schemas["DeviceAppsResponse"]["properties"]
    apps["app_type"]["enum"] = [*apps["app_type"]["enum"], "VPP"]
    for name in ("app_id", "app_version_id"):
        apps[name] = _nullable(apps[name])
    for command in ("CommandRequest", "V0CommandRequest"):
        props = schemas.get(command, {}).get("properties", {})
        for name in ("groups", "schedule_args", "reason", "alias"):
            if name in props:
                props[name] = _nullable(props[name])
    # command status items (live route 29): `reason` null when there is none
    status = schemas["CommandStatus"]["properties"]
    status["reason"] = _nullable(status["reason"])
    for path, item in doc["paths"].items():
        get = item.get("get", {})
        body = (
            get.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
        )
        content = body.get("schema", {}).get("properties", {}).get("content", {})
        props = content.get("properties", {})
        if path.startswith("/v2/") and isinstance(props.get("results"), dict):
            props["results"] = _nullable(props["results"])
        if path.startswith("/commands/v0/") and "previous" in props:
            props["prev"] = props.pop("previous")


def pointer(*parts: str) -> str:
    """A ``#/...`` JSON pointer into the subset."""
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def response_schema(template: str, status: int, family: str, method: str = "get") -> str | None:
    """The schema (a ``#/...`` pointer) a response of ``template`` with ``status`` must match:
    the documented response, else for an error status the family's error schema (quirk 4), else
    None (the subset documents no such answer).

    Args:
        template: the subset's path key, e.g. ``/v2/devices/{id}``.
        status: the HTTP status received.
        family: ``legacy``, ``v2`` or ``reports`` (for undocumented error statuses, quirk 4).
        method: the HTTP method.
    """
    responses = patched_subset()["paths"][template][method]["responses"]
    key = str(status)
    if key in responses and "content" in responses[key]:
        return pointer(
            "paths", template, method, "responses", key, "content", "application/json", "schema"
        )
    if status >= 400:
        return FAMILY_ERRORS[family]
    return None


def datatap_schema(body: Any) -> str:
    """Quirk 5: the Reports shape a Data Tap body is modelled on (by its status)."""
    if body["content"]["status"] == "SUCCEEDED":
        return "#/components/schemas/GetReportResponsePreview"
    return "#/components/schemas/CreateReportResponse"
