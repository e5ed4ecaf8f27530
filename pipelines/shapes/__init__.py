"""One home for comparing an Esper answer with the recorded shapes (docs/decisions.md, issue 20).

The references are `docs/spec/live-shapes.json` (what the real API answered) and the OpenAPI
subset `docs/spec/esper-openapi-subset.json`, both found with `data_path`. Three callers compare
with them, each by its own rules, and each keeps its result:

* `esper-warehouse doctor` grades a real tenant's answer: `reference` picks the route's reference
  (the live recording, else the documented shape, else the subset), `check_answer` and `Compare`
  name what would break a run and what is a note (`compare.py`);
* the simulator tests compare a simulator answer's full shape with the live one, all or nothing:
  `shape_of` and `shape_problems` (`conform.py`);
* the simulator's conformance tests validate answers against the subset with its known quirks
  patched: `patched_subset`, `response_schema`, `datatap_schema` (`openapi.py`; the JSON Schema
  validator itself is a test dependency and stays in `tests/simulator/openapi.py`).

Files: `reference.py` (the documents, the notation, `Node` and the lookups), `compare.py`
(doctor's rules), `conform.py` (the simulator tests' rules), `openapi.py` (the patched subset).
"""

from __future__ import annotations

from .compare import (
    BREAK,
    ENVELOPE_READS,
    LINKS,
    NOTE,
    SET_ASIDE,
    SHAPE_DEPTH,
    UNKNOWN_KEY,
    Compare,
    Finding,
    Seen,
    check_answer,
    known_keys,
    read_paths,
    report_shape,
    required_paths,
    safe_key,
)
from .conform import FREE_FORM, shape_problems
from .openapi import FAMILY_ERRORS, datatap_schema, patched_subset, pointer, response_schema
from .reference import (
    LIVE_SHAPES,
    OPENAPI,
    Node,
    Reference,
    docs_reference,
    envelope_node,
    families,
    from_live,
    from_spec,
    json_type,
    live_document,
    live_reference,
    merge,
    norm_path,
    openapi_document,
    record_node,
    reference,
    shape_of,
    spec_reference,
)

__all__ = [
    "BREAK",
    "ENVELOPE_READS",
    "FAMILY_ERRORS",
    "FREE_FORM",
    "LINKS",
    "LIVE_SHAPES",
    "NOTE",
    "OPENAPI",
    "SET_ASIDE",
    "SHAPE_DEPTH",
    "UNKNOWN_KEY",
    "Compare",
    "Finding",
    "Node",
    "Reference",
    "Seen",
    "check_answer",
    "datatap_schema",
    "docs_reference",
    "envelope_node",
    "families",
    "from_live",
    "from_spec",
    "json_type",
    "known_keys",
    "live_document",
    "live_reference",
    "merge",
    "norm_path",
    "openapi_document",
    "patched_subset",
    "pointer",
    "read_paths",
    "record_node",
    "reference",
    "report_shape",
    "required_paths",
    "response_schema",
    "safe_key",
    "shape_of",
    "shape_problems",
    "spec_reference",
]
