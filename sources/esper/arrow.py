"""Pages of API records -> Arrow tables with a declared schema: the one conversion every table uses.

Declared columns get their declared type whatever a page holds (a column missing from a page is
null, never absent). Nested objects and lists become JSON text columns (typed `json` for dlt), and
the nested fields analysts need are also flattened into typed `parent__child` columns. Fields the
declaration does not know yet are kept, typed from their values, so nothing the API serves is lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc

UTC_TS = pa.timestamp("us", tz="UTC")
ARROW_TYPES: dict[str, pa.DataType] = {
    "text": pa.string(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": UTC_TS,
    "json": pa.string(),
}
ROW_VERSION = "_row_hash"  # the scd2 row version column: a hash of the record's content


@dataclass(frozen=True)
class Col:
    """A declared column: its name, dlt data type and where it sits in a record."""

    name: str
    type: str = "text"
    path: tuple[str, ...] = ()
    convert: Callable[[Any], Any] | None = None  # applied to each value before typing

    @property
    def source(self) -> tuple[str, ...]:
        return self.path or (self.name,)


class Declared(Protocol):
    """What `to_arrow` reads of a table's declaration (`table.Table`)."""

    name: str
    columns: tuple[Col, ...]
    keep_extra: bool
    extra: Mapping[str, str]


def cols(spec: str, type_: str = "text") -> tuple[Col, ...]:
    """Declare several top-level columns of one type: `cols("id name alias")`."""
    return tuple(Col(n, type_) for n in spec.split())


def flat(spec: str, type_: str = "text") -> tuple[Col, ...]:
    """Declare flattened nested fields by their dlt names: `flat("hardware_info__brand")`."""
    return tuple(Col(n, type_, tuple(n.split("__"))) for n in spec.split())


def _dig(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = record
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def parse_timestamps(values: Sequence[Any]) -> pa.Array:
    """ISO 8601 strings (with `Z`, an offset, or none = UTC) to `timestamp[us, UTC]`."""
    strings = pa.array([None if v in (None, "") else str(v) for v in values], pa.string())
    try:
        return pc.cast(strings, UTC_TS)
    except pa.ArrowInvalid:
        pass
    # Mixed or naive values: parse one by one, naive ones read as UTC.
    from datetime import UTC, datetime

    parsed = []
    for v in strings.to_pylist():
        if v is None:
            parsed.append(None)
            continue
        ts = datetime.fromisoformat(v.replace("Z", "+00:00"))
        parsed.append(ts if ts.tzinfo else ts.replace(tzinfo=UTC))
    return pa.array(parsed, UTC_TS)


def _typed(values: list[Any], type_: str) -> pa.Array:
    if type_ == "timestamp":
        return parse_timestamps(values)
    if type_ == "json":
        return pa.array([_json(v) for v in values], pa.string())
    arrow_type = ARROW_TYPES[type_]
    try:
        return pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return pa.array([_coerce(v, type_) for v in values], arrow_type)


def _coerce(value: Any, type_: str) -> Any:
    if value is None or value == "":
        return None
    if type_ == "text":
        return value if isinstance(value, str) else _json(value)
    if type_ == "bigint":
        return int(float(value))
    if type_ == "double":
        return float(value)
    if type_ == "bool":
        return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes")
    return value


def _infer(values: Iterable[Any]) -> str | None:
    """dlt type of an undeclared field, from the values one page holds."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return None
    if kinds <= {bool}:
        return "bool"
    if kinds <= {int}:
        return "bigint"
    if kinds <= {int, float}:
        return "double"
    if kinds <= {str}:
        return "text"
    return "json"


def to_arrow(
    records: Sequence[Mapping[str, Any]],
    schema: Declared,
    *,
    add: Mapping[str, tuple[str, Any]] | None = None,
    row_hash: bool = False,
) -> pa.Table:
    """Turn one page of records into an Arrow table with the table's declared schema.

    Args:
        records: the page's items, as the API served them.
        schema: the table's declaration.
        add: constant columns to add, `{name: (dlt type, value)}` (e.g. the parent id).
        row_hash: add `ROW_VERSION`, a hash of the record's content (the scd2 row version).

    Returns:
        The page as a `pyarrow.Table`; undeclared fields follow the declared columns.
    """
    arrays: dict[str, pa.Array] = {}
    n = len(records)
    for name, (type_, value) in (add or {}).items():
        arrays[name] = _typed([value] * n, type_)
    for col in schema.columns:
        path = col.source
        if len(path) == 1:
            values = [r.get(path[0]) for r in records]
        else:
            values = [_dig(r, path) for r in records]
        if col.convert is not None:
            values = [col.convert(v) for v in values]
        arrays[col.name] = _typed(values, col.type)
    if schema.keep_extra:
        declared = {c.source[0] for c in schema.columns if len(c.source) == 1} | set(arrays)
        extra_keys: dict[str, None] = {}
        for r in records:
            for k in r:
                if k not in declared:
                    extra_keys[k] = None
        for key in extra_keys:
            values = [r.get(key) for r in records]
            type_ = schema.extra.get(key) or _infer(values)
            if type_ is not None:
                arrays[key] = _typed(values, type_)
    if row_hash:
        arrays[ROW_VERSION] = pa.array(
            [
                hashlib.blake2b(
                    orjson.dumps(r, option=orjson.OPT_SORT_KEYS), digest_size=16
                ).hexdigest()
                for r in records
            ],
            pa.string(),
        )
    if not arrays:
        return pa.table({})
    return pa.table(arrays)


def column_values(table: pa.Table, name: str) -> list[Any]:
    """One column of a converted page as Python values."""
    return table.column(name).to_pylist() if name in table.column_names else []
