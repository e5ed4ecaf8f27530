"""Pages of API records -> Arrow tables with a declared schema: the one conversion every table uses.

Declared columns get their declared type whatever a page holds (a column missing from a page is
null, never absent). Nested objects and lists become JSON text columns (typed `json` for dlt), and
the nested fields analysts need are also flattened into typed `parent__child` columns. Fields the
declaration does not know yet are kept, typed from their values, so nothing the API serves is lost.

A value that cannot be read as its column's type (a year-0 time, a word in a number column, 1.5
where a whole number belongs) is loaded as NULL and counted per column in the run's `Unreadable`
tally, which the run record keeps and `status` shows: one odd value never ends the night. A key
or cursor that cannot be read ends it (`UnreadableKey`), naming the column and the value; a
record without one is set aside before it gets here (`Table.keyed`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .http.errors import REDACTED, EsperResponseError, redact, secret_pattern
from .times import parse_time

log = logging.getLogger("esper_warehouse.source")

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
SHOWN_CHARS = 60  # a served value quoted in a warning or an error is cut to this many characters


@dataclass(frozen=True)
class Col:
    """A declared column: its name, dlt data type and where it sits in a record."""

    name: str
    type: str = "text"
    path: tuple[str, ...] = ()
    # applied to each value before typing; ValueError: the value cannot be read (NULL, counted)
    convert: Callable[[Any], Any] | None = None

    @property
    def source(self) -> tuple[str, ...]:
        return self.path or (self.name,)


class Declared(Protocol):
    """What `to_arrow` reads of a table's declaration (`table.Table`)."""

    name: str
    columns: tuple[Col, ...]
    keep_extra: bool
    extra: Mapping[str, str]
    identifying: frozenset[str]  # key and cursor columns: never read as NULL


def cols(spec: str, type_: str = "text") -> tuple[Col, ...]:
    """Declare several top-level columns of one type: `cols("id name alias")`."""
    return tuple(Col(n, type_) for n in spec.split())


def flat(spec: str, type_: str = "text") -> tuple[Col, ...]:
    """Declare flattened nested fields by their dlt names: `flat("hardware_info__brand")`."""
    return tuple(Col(n, type_, tuple(n.split("__"))) for n in spec.split())


class _NotAnObject(ValueError):
    """A nested field's path runs into a value that is not an object (`software_info: []`)."""

    def __init__(self, where: tuple[str, ...], value: Any) -> None:
        self.reason = f"{'.'.join(where)} is a {type(value).__name__}, not an object"
        super().__init__(self.reason)
        self.value = value


def _dig(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path`; None where a part is absent or null.

    Raises:
        _NotAnObject: a part on the way is a value that is not an object (unreadable).
    """
    value: Any = record
    for depth, part in enumerate(path):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise _NotAnObject(path[:depth], value)
        value = value.get(part)
    return value


def _dug(records: Sequence[Mapping[str, Any]], path: tuple[str, ...]) -> list[Any]:
    """Each record's value at `path`, a path that runs into a non-object kept as its error
    (read as NULL and counted by `_typed`, like any value that cannot be read)."""
    values: list[Any] = []
    for record in records:
        try:
            values.append(_dig(record, path))
        except _NotAnObject as error:
            values.append(error)
    return values


def _json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits
        return json.dumps(value, default=str)


class UnreadableKey(EsperResponseError):
    """A table's key or cursor the API served in a form that cannot be read (API failure: exit 3).

    Only keys and cursors end a run: a row without its key cannot be merged, and a cursor that
    cannot be read cannot move. Every other value reads as NULL and is counted (`Unreadable`).
    """


class MissingKey(UnreadableKey):
    """Items served without their table's key or cursor (absent, null or empty): exit 3, naming
    `table.column`, the route and how many. Such an item is never keyed `(None,)`, merged with
    another, loaded as NULL or left out quietly: it cannot be told apart from the next one."""


def missing_key(column: str, missing: int, total: int, route: str | None = None) -> MissingKey:
    """The error of `missing` items of `total` (one read) served without `column`'s value."""
    where = f" from GET {route}" if route else ""
    return MissingKey(
        f"{column}: missing or null in {missing} of {total} item(s){where}; it is the table's key "
        "or cursor, which is never loaded as NULL (the run ends, nothing of it loaded)"
    )


def unreadable_key(column: str, value: Any, type_: str, reason: str) -> UnreadableKey:
    """The error of a key or cursor value (of `column`, `table.column`) that cannot be read."""
    return UnreadableKey(
        f"{column}: {shown(value)} cannot be read as {type_} ({reason}); it is the table's key "
        "or cursor, which is never loaded as NULL"
    )


class Unreadable:
    """The values one run could not read, per `table.column`: each loaded as NULL and counted.

    Written by `Table.page` as each resource converts its pages (`RunLedger.unreadable`, shared
    by the run's resources); thread-safe, as the fan-outs convert their pages in dlt's worker
    threads. Read by the pipeline's runner for the run record (`counts`). The first unreadable
    value of each column is logged.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, column: str, count: int, example: Any, type_: str, why: str) -> None:
        """Count `count` values of `column` (`table.column`) read as NULL; `example` is one."""
        with self._lock:
            first = column not in self._counts
            self._counts[column] = self._counts.get(column, 0) + count
        if first:
            log.warning(
                "%s: %s cannot be read as %s (%s); loaded as NULL, counted in the run record",
                column,
                shown(example),
                type_,
                why,
            )

    def counts(self) -> dict[str, int]:
        """`table.column` -> how many values read as NULL so far in this run."""
        with self._lock:
            return dict(sorted(self._counts.items()))


def shown(value: Any) -> str:
    """A value the API served, for a warning or an error: redacted whole, then cut short.

    A server may echo anything into a field, the request's own `Authorization` header included:
    the key is taken out before the cut (a key cut first no longer matches), and a long value
    shows its start and its length, enough to find the record.
    """
    text = redact(repr(value))
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[: SHOWN_CHARS - 3]}... (a {type(value).__name__} of {len(text)} characters)"


def _read_int(value: Any) -> int:
    """A whole number from a number or its text; a fraction (1.5) is not truncated: unreadable."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            value = _read_float(text)  # "12.0"; a word raises
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("not a whole number")
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"a {type(value).__name__} is not a number")
    if not INT64[0] <= value <= INT64[1]:
        raise ValueError("outside the 64-bit range")
    return value


def _read_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"a {type(value).__name__} is not a number")
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise ValueError("not a number") from None


TRUE_WORDS, FALSE_WORDS = (
    frozenset({"true", "t", "yes", "y", "1"}),
    frozenset({"false", "f", "no", "n", "0"}),
)


def _read_bool(value: Any) -> bool:
    """true/false, 1/0, and their words (`"yes"`, `"False"`); anything else is unreadable."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower() if isinstance(value, str) else None
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError("not true or false")


def _read_text(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)  # type: ignore[return-value]


def _read_time(value: Any) -> datetime | None:
    ts = parse_time(value)
    return ts.astimezone(UTC) if ts is not None else None


# Each declared type's reader: a value as Python gives it to Arrow, or ValueError (unreadable).
READERS: dict[str, Callable[[Any], Any]] = {
    "text": _read_text,
    "bigint": _read_int,
    "double": _read_float,
    "bool": _read_bool,
    "timestamp": _read_time,
    "json": _json,
}
# Python types Arrow converts to the declared type exactly as the reader would (the fast path).
# `bool` is no `int` here: Arrow would take True as 1; a float is no bigint: Arrow truncates 1.5.
EXACT: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "bigint": (int,),
    "double": (float, int),
    "bool": (bool,),
}
INT64 = (-(2**63), 2**63 - 1)
_EPOCH, _US = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)
_TS_RANGE = (  # what Python (and so every tool reading the warehouse) can show: years 1-9999
    (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _US,
    (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - _EPOCH) // _US,
)


def _fast(values: list[Any], type_: str) -> pa.Array | None:
    """The column converted by Arrow at once when every value is of a type it reads exactly
    (ISO text for timestamps, checked to lie within years 1-9999); None: read value by value."""
    if type_ == "timestamp":
        if not all(v is None or type(v) is str for v in values):
            return None
        try:
            array = pc.cast(pa.array([v or None for v in values], pa.string()), UTC_TS)
        except (pa.ArrowException, OverflowError, ValueError):
            return None
        low, high = pc.min_max(array.cast(pa.int64())).values()
        if low.is_valid and (low.as_py() < _TS_RANGE[0] or high.as_py() > _TS_RANGE[1]):
            return None
        return array
    exact = EXACT.get(type_)
    if exact is None or not all(v is None or type(v) in exact for v in values):
        return None
    try:
        return pa.array(values, ARROW_TYPES[type_])
    except (pa.ArrowException, OverflowError):  # an int beyond 64 bits
        return None


def _typed(
    values: list[Any],
    type_: str,
    column: str,
    unreadable: Unreadable | None,
    identifying: bool = False,
    route: str | None = None,
) -> pa.Array:
    """A column's values as its declared type. A value that cannot be read is NULL and counted
    in `unreadable` (under `column`, i.e. `table.column`), or, in a key or cursor column
    (`identifying`), an `UnreadableKey`; a key or cursor absent or null is a `MissingKey`."""
    if identifying:
        missing = sum(v is None or v == "" for v in values)
        if missing:
            raise missing_key(column, missing, len(values), route)
    if type_ != "json" and (fast := _fast(values, type_)) is not None:
        return fast  # (never holds a `_NotAnObject`: its type is no exact one)
    read = READERS[type_]
    out: list[Any] = []
    bad, example, why = 0, None, ""
    for value in values:
        if value is None or (value == "" and type_ != "text"):
            out.append(None)
            continue
        try:
            if isinstance(value, _NotAnObject):
                raise value
            out.append(read(value))
        except (ValueError, TypeError, OverflowError) as error:
            reason = getattr(error, "reason", None) or str(error)
            if identifying:
                raise unreadable_key(column, value, type_, reason) from None
            out.append(None)
            value = getattr(error, "value", value)  # a `_NotAnObject`: what it ran into
            bad, example, why = bad + 1, (value if not bad else example), (why or reason)
    if bad and unreadable is not None:
        unreadable.add(column, bad, example, type_, why)
    return pa.array(out, ARROW_TYPES[type_])


def _convert(col: Col, values: list[Any], column: str, unreadable: Unreadable | None) -> list[Any]:
    """A column's `convert` applied to each value; a value it cannot read (ValueError) is None,
    counted like any other unreadable value."""
    assert col.convert is not None
    out: list[Any] = []
    bad, example, why = 0, None, ""
    for value in values:
        if isinstance(value, _NotAnObject):  # counted once, by `_typed`
            out.append(value)
            continue
        try:
            out.append(col.convert(value))
        except (ValueError, TypeError) as error:
            out.append(None)
            bad, example, why = bad + 1, (value if not bad else example), (why or str(error))
    if bad and unreadable is not None:
        unreadable.add(column, bad, example, col.type, why)
    return out


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
    unreadable: Unreadable | None = None,
    add: Mapping[str, tuple[str, Any]] | None = None,
    row_hash: bool = False,
) -> pa.Table:
    """Turn one page of records into an Arrow table with the table's declared schema.

    Args:
        records: the page's items, as the API served them.
        schema: the table's declaration.
        unreadable: the run's tally of values read as NULL (None: not counted, for tools and
            tests; a run's resources always pass theirs, through `Table.page`).
        add: constant columns to add, `{name: (dlt type, value)}` (e.g. the parent id).
        row_hash: add `ROW_VERSION`, a hash of the record's content (the scd2 row version).

    Returns:
        The page as a `pyarrow.Table`; undeclared fields follow the declared columns.

    Raises:
        UnreadableKey: a key or cursor value cannot be read as its column's type.
        MissingKey: an item lacks its key or cursor (absent, null or empty).
    """
    arrays: dict[str, pa.Array] = {}
    n = len(records)

    identifying = schema.identifying
    route = getattr(schema, "path", None)  # a `Table`'s route, named when a key is missing

    def typed(name: str, values: list[Any], type_: str) -> pa.Array:
        column = f"{schema.name}.{name}"
        return _typed(values, type_, column, unreadable, name in identifying, route)

    for name, (type_, value) in (add or {}).items():
        arrays[name] = typed(name, [value] * n, type_)
    for col in schema.columns:
        path = col.source
        values = [r.get(path[0]) for r in records] if len(path) == 1 else _dug(records, path)
        if col.convert is not None:
            values = _convert(col, values, f"{schema.name}.{col.name}", unreadable)
        arrays[col.name] = typed(col.name, values, col.type)
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
                arrays[key] = typed(key, values, type_)
    if row_hash:
        arrays[ROW_VERSION] = pa.array([_content_hash(r) for r in records], pa.string())
    if not arrays:
        return pa.table({})
    return pa.table(_without_keys(arrays))


def _without_keys(arrays: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """Every text column with the API key taken out (`errors.redact`'s pattern): a server that
    echoes the request's `Authorization` header into a field never puts the key in the
    warehouse. One scan per text column of a page (~18 ms per 150,000 values); a column is
    rewritten only when it holds a key."""
    pattern = secret_pattern()
    if pattern is None:
        return arrays
    out = dict(arrays)
    for name, array in arrays.items():
        if not pa.types.is_string(array.type) or array.null_count == len(array):
            continue
        if pc.any(pc.match_substring_regex(array, pattern, ignore_case=True)).as_py():
            out[name] = pc.replace_substring_regex(array, f"(?i){pattern}", REDACTED)
    return out


def _content_hash(record: Mapping[str, Any]) -> str:
    try:
        content = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits
        content = json.dumps(record, sort_keys=True, default=str).encode()
    return hashlib.blake2b(content, digest_size=16).hexdigest()


def column_values(table: pa.Table, name: str) -> list[Any]:
    """One column of a converted page as Python values."""
    return table.column(name).to_pylist() if name in table.column_names else []
