"""The Data Tap query dialect: Spark SQL in, DuckDB underneath, Databricks-like results out.

``spark_to_duckdb`` translates a query (refusing a double-quoted identifier, as live);
``column_type`` names a result column's type as the live schema does; ``cell_value`` turns a
DuckDB value into what the result's ``data_array`` carries.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import duckdb


def column_type(t: duckdb.typing.DuckDBPyType) -> tuple[str, str]:
    """``(type_name, type_text)`` of a result column of DuckDB type ``t``."""
    s = str(t).upper()
    simple = {
        "BOOLEAN": ("BOOLEAN", "boolean"),
        "TINYINT": ("BYTE", "tinyint"),
        "SMALLINT": ("SHORT", "smallint"),
        "INTEGER": ("INT", "int"),
        "BIGINT": ("LONG", "bigint"),
        "HUGEINT": ("LONG", "bigint"),
        "UBIGINT": ("LONG", "bigint"),
        "UINTEGER": ("LONG", "bigint"),
        "FLOAT": ("FLOAT", "float"),
        "DOUBLE": ("DOUBLE", "double"),
        "VARCHAR": ("STRING", "string"),
        "DATE": ("DATE", "date"),
        "TIMESTAMP": ("TIMESTAMP", "timestamp"),
        "TIMESTAMP WITH TIME ZONE": ("TIMESTAMP", "timestamp"),
    }
    if s in simple:
        return simple[s]
    if s.startswith("DECIMAL"):
        return "DECIMAL", s.lower()
    return "STRING", "string"


def cell_value(v: Any) -> Any:
    """A result cell as the job keeps it: times as UTC ISO text, decimals as floats."""
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (list, dict, tuple)):
        return str(v)
    return v


_SINGLE_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'")
_DOUBLE_QUOTED_NAME = re.compile(r'"[A-Za-z_][A-Za-z0-9_]*"')


def spark_to_duckdb(sql: str) -> str:
    """The live dialect (Spark SQL) translated for DuckDB; a double-quoted identifier refused.

    Live Data Tap runs Spark SQL, where `"name"` is not an identifier (backticks are): the job
    ends FAILED with an error message, as this raises `duckdb.Error` into the job's error.
    """
    import sqlglot

    found = _DOUBLE_QUOTED_NAME.search(_SINGLE_QUOTED.sub("''", sql))
    if found:
        raise duckdb.Error(
            f"[PARSE_SYNTAX_ERROR] double-quoted identifier {found.group(0)} is not Spark SQL: "
            "quote identifiers with backticks"
        )
    try:
        return sqlglot.transpile(sql, read="spark", write="duckdb")[0]
    except sqlglot.errors.ParseError as error:
        raise duckdb.Error(f"[PARSE_SYNTAX_ERROR] {str(error).splitlines()[0]}") from None
