"""A central Postgres warehouse: pull the raw tables into DuckDB, build the models, publish the marts.

The models are DuckDB SQL (ASOF joins, `* exclude`, macros, structs): they are built in DuckDB
whatever the central warehouse is. With Postgres:

1. `esper-warehouse run --destination postgres` loads the raw tables into Postgres with dlt
   (credentials: dlt's `DESTINATION__POSTGRES__CREDENTIALS` or `secrets.toml`);
2. `esper-warehouse publish --pull --warehouse compute.duckdb` copies the raw tables of the
   dataset (`COPY ... TO STDOUT`, typed from Postgres' catalog) into a DuckDB compute file,
   builds the models there, and
3. publishes every mart into the Postgres schema `marts` (one table per mart, list and struct
   columns as `jsonb`), in one transaction: readers see the old marts or the new ones, and a
   second publish of the same data gives the same rows.

Without `--pull` the marts of an existing DuckDB warehouse (a nightly `run`) are published.
No DuckDB extension is needed (DuckDB's `postgres` extension downloads from DuckDB's own server).
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dlt
import duckdb

from ..exit_codes import Exit
from ..warehouse import create_if_missing
from .status import missing_message, open_failure

log = logging.getLogger("esper_warehouse")

CREDENTIALS = "destination.postgres.credentials"
SCALARS = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "UTINYINT": "integer",
    "USMALLINT": "integer",
    "UINTEGER": "bigint",
    "UBIGINT": "numeric",
    "HUGEINT": "numeric",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "VARCHAR": "text",
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "INTERVAL": "interval",
    "UUID": "uuid",
    "JSON": "jsonb",
    "BLOB": "bytea",
}
FROM_POSTGRES = {
    "boolean": "BOOLEAN",
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "date": "DATE",
    "time without time zone": "TIME",
    "timestamp without time zone": "TIMESTAMP",
    "timestamp with time zone": "TIMESTAMPTZ",
    "interval": "INTERVAL",
    "uuid": "UUID",
    "json": "JSON",
    "jsonb": "JSON",
}
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


class PublishError(RuntimeError):
    """Publishing failed; the message never holds the credentials."""


class PublishLocked(PublishError):
    """The marts stayed held by other sessions for the whole lock timeout (exit 5)."""


# Seconds `publish` waits for readers of the marts before giving up (`--lock-timeout`).
LOCK_TIMEOUT_SETTING = (
    "esper_warehouse.publish_lock_timeout_s"  # ESPER_WAREHOUSE__PUBLISH_LOCK_TIMEOUT_S
)
DEFAULT_LOCK_TIMEOUT_S = 60.0
APPLICATION_NAME = "esper-warehouse publish"  # how DBAs see it in pg_stat_activity
LOCK_RETRY_S = 0.2  # between two attempts to take every mart at once
# Postgres' error classes of a connection lost or refused (Postgres down): exit 2 at connect
# and mid-transaction alike
CONNECTION_LOST = ("08", "57P")


def dsn(credentials: str | Mapping[str, Any] | None = None) -> str:
    """A libpq connection string from `credentials`, else from dlt's postgres credentials."""
    if credentials is None:
        credentials = dlt.secrets.get(CREDENTIALS)
    if not credentials:
        raise PublishError(
            "no Postgres credentials: set DESTINATION__POSTGRES__CREDENTIALS "
            "(postgresql://user:password@host:5432/database) or [destination.postgres] "
            "credentials in .dlt/secrets.toml"
        )
    if isinstance(credentials, str):
        return credentials
    from dlt.destinations.impl.postgres.configuration import PostgresCredentials  # as above

    parsed = PostgresCredentials()
    for key, value in dict(credentials).items():
        setattr(parsed, key, value)
    return str(parsed.to_native_representation())


def connect(credentials: str | Mapping[str, Any] | None = None) -> Any:
    """A psycopg2 connection (the driver dlt's postgres destination installs), UTC session."""
    import psycopg2  # the `postgres` extra: only `publish` needs it

    try:
        con = psycopg2.connect(dsn(credentials), application_name=APPLICATION_NAME)
    except psycopg2.Error as error:
        # libpq's message names host and port, never the password
        raise PublishError(f"cannot connect to Postgres: {str(error).strip()}") from None
    with con.cursor() as cur:
        cur.execute("set time zone 'UTC'")
    return con


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def postgres_type(duckdb_type: str) -> tuple[str, bool]:
    """The Postgres column type of a DuckDB type, and whether the value goes as JSON.

    Lists, structs and maps become `jsonb` (Postgres has no unnamed composite types).
    """
    kind = duckdb_type.upper()
    if kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION")):
        return "jsonb", True
    if kind.startswith("DECIMAL"):
        return kind.replace("DECIMAL", "numeric"), False
    if kind.startswith("TIMESTAMP") and "TIME ZONE" not in kind:
        return ("timestamptz" if kind == "TIMESTAMPTZ" else "timestamp"), False
    if kind == "TIMESTAMPTZ":
        return "timestamptz", False
    if kind in SCALARS:
        return SCALARS[kind], kind == "JSON"
    if kind.startswith("ENUM"):
        return "text", False
    raise PublishError(f"no Postgres type for DuckDB type {duckdb_type}")


def _duckdb_type(data_type: str, precision: int | None, scale: int | None) -> str:
    if data_type == "numeric":
        return f"DECIMAL({precision},{scale})" if precision else "DOUBLE"
    if data_type == "ARRAY" or data_type == "USER-DEFINED":
        return "VARCHAR"
    return FROM_POSTGRES.get(data_type, "VARCHAR")


def pull(pg: Any, dataset: str, compute: Path, *, schema: str = "esper") -> dict[str, int]:
    """Copy every table of the Postgres schema `dataset` into `compute` as `<schema>.<table>`.

    Each table goes through `COPY ... TO STDOUT (FORMAT csv)` into DuckDB's CSV reader with the
    column types read from Postgres' catalog; the tables are replaced in one DuckDB transaction.

    Returns:
        Rows per table.
    """
    with pg.cursor() as cur:
        cur.execute(
            "select table_name, column_name, data_type, numeric_precision, numeric_scale "
            "from information_schema.columns where table_schema = %s "
            "order by table_name, ordinal_position",
            [dataset],
        )
        columns: dict[str, list[tuple[str, str]]] = {}
        for table, column, data_type, precision, scale in cur.fetchall():
            columns.setdefault(table, []).append(
                (column, _duckdb_type(data_type, precision, scale))
            )
    if not columns:
        raise PublishError(f"Postgres has no tables in schema {dataset!r}: load it first")
    counts: dict[str, int] = {}
    create_if_missing(compute)
    con = duckdb.connect(str(compute))
    try:
        con.execute("begin transaction")
        con.execute(f"create schema if not exists {_quote(schema)}")
        with tempfile.TemporaryDirectory(prefix="esper-pull-") as tmp:
            for table, cols in columns.items():
                path = Path(tmp) / f"{table}.csv"
                names = ", ".join(_quote(c) for c, _ in cols)
                with pg.cursor() as cur, open(path, "w", encoding="utf-8") as out:
                    cur.copy_expert(
                        f"copy (select {names} from {_quote(dataset)}.{_quote(table)}) "
                        "to stdout (format csv, header true)",
                        out,
                    )
                types = "{" + ", ".join(f"'{c}': '{t}'" for c, t in cols) + "}"
                con.execute(
                    f"create or replace table {_quote(schema)}.{_quote(table)} as "
                    f"select * from read_csv(?, header = true, columns = {types}, "
                    "delim = ',', quote = '\"', escape = '\"', allow_quoted_nulls = false)",
                    [str(path)],
                )
                row = con.execute(f"select count(*) from {_quote(schema)}.{_quote(table)}")
                counts[table] = int(row.fetchone()[0])  # type: ignore[index]
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    finally:
        con.close()
    return counts


def publish(
    warehouse: Path,
    pg: Any,
    *,
    schema: str = "marts",
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> dict[str, int]:
    """Replace the Postgres schema `schema`'s tables with every mart of the DuckDB `warehouse`.

    One Postgres transaction: every published table is locked at once first (`_lock_all`, so
    no reader waits while publish waits for another), then each mart's table is dropped and
    created (types from DuckDB's, lists and structs as `jsonb`) and its rows `COPY`ed in as
    CSV. Marts no longer built are dropped.

    Raises:
        PublishLocked: a session kept a mart for `lock_timeout_s` (named); nothing changed.

    Returns:
        Rows per published table.
    """
    if not IDENTIFIER.match(schema):
        raise PublishError(f"schema {schema!r}: use a lowercase identifier")
    con = duckdb.connect(str(warehouse), read_only=True)
    counts: dict[str, int] = {}
    try:
        marts = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_catalog = "
                "current_database() and table_schema = 'marts' order by table_name"
            ).fetchall()
        ]
        if not marts:
            raise PublishError(f"{warehouse} has no marts: build the models first")
        with pg, pg.cursor() as cur:
            cur.execute(f"create schema if not exists {_quote(schema)}")
            cur.execute(
                "select table_name from information_schema.tables where table_schema = %s",
                [schema],
            )
            existing = [name for (name,) in cur.fetchall()]
            _lock_all(cur, schema, existing, lock_timeout_s)
            for stale in existing:
                if stale not in marts:
                    cur.execute(f"drop table {_quote(schema)}.{_quote(stale)}")
            for mart in marts:
                described = con.execute(f"describe marts.{_quote(mart)}").fetchall()
                definitions, selected = [], []
                for column, kind, *_ in described:
                    pg_type, as_json = postgres_type(kind)
                    definitions.append(f"{_quote(column)} {pg_type}")
                    selected.append(
                        f"to_json({_quote(column)}) as {_quote(column)}"
                        if as_json
                        else _quote(column)
                    )
                target = f"{_quote(schema)}.{_quote(mart)}"
                cur.execute(f"drop table if exists {target}")
                cur.execute(f"create table {target} ({', '.join(definitions)})")
                with tempfile.TemporaryDirectory(prefix="esper-publish-") as tmp:
                    path = Path(tmp) / f"{mart}.csv"
                    con.execute(
                        f"copy (select {', '.join(selected)} from marts.{_quote(mart)}) "
                        f"to '{path}' (header true, delimiter ',', quote '\"', escape '\"')"
                    )
                    with open(path, encoding="utf-8") as handle:
                        cur.copy_expert(
                            f"copy {target} from stdin (format csv, header true)", handle
                        )
                cur.execute(f"select count(*) from {target}")
                counts[mart] = int(cur.fetchone()[0])
    finally:
        con.close()
    return counts


def _lock_all(cur: Any, schema: str, tables: list[str], timeout_s: float) -> None:
    """Take every table of `schema` at once, or none, until `timeout_s`; else name the holders.

    Each attempt is `LOCK ... NOWAIT` of all the tables in one statement inside a savepoint: it
    fails at once if any table is held, and rolling back to the savepoint lets go of those it
    had taken, so readers of the other marts never queue behind a publish that waits.

    Raises:
        PublishLocked: still held after `timeout_s`: pid, application, state and since when.
    """
    if not tables:
        return
    names = ", ".join(f"{_quote(schema)}.{_quote(t)}" for t in tables)
    deadline = time.monotonic() + timeout_s
    while True:
        cur.execute("savepoint esper_lock")
        try:
            cur.execute(f"lock table {names} in access exclusive mode nowait")
        except Exception as error:
            if getattr(error, "pgcode", None) != "55P03":  # lock_not_available
                raise
            cur.execute("rollback to savepoint esper_lock")
            if time.monotonic() >= deadline:
                raise PublishLocked(_holders_text(cur, schema, tables, timeout_s)) from None
            time.sleep(LOCK_RETRY_S)
            continue
        cur.execute("release savepoint esper_lock")
        return


def _holders_text(cur: Any, schema: str, tables: list[str], timeout_s: float) -> str:
    """Which sessions hold the tables (pg_locks joined to pg_stat_activity)."""
    cur.execute(
        "select distinct c.relname, a.pid, coalesce(nullif(a.application_name, ''), '?'), "
        "a.state, coalesce(a.state_change, a.xact_start) "
        "from pg_locks l join pg_class c on c.oid = l.relation "
        "join pg_namespace n on n.oid = c.relnamespace "
        "join pg_stat_activity a on a.pid = l.pid "
        "where l.granted and l.pid <> pg_backend_pid() and n.nspname = %s "
        "and c.relname = any(%s) order by 1, 2",
        [schema, tables],
    )
    held = [
        f"{schema}.{table} by pid {pid} ({app}, {state} since "
        f"{since.isoformat(sep=' ', timespec='seconds') if since else '?'})"
        for table, pid, app, state, since in cur.fetchall()
    ]
    return (
        f"the marts are still in use after {timeout_s:g} s: "
        + ("; ".join(held) or "the holder has just let go")
        + ". Nothing was published (the old marts are unchanged); end that session or its "
        "transaction, or raise --lock-timeout (ESPER_WAREHOUSE__PUBLISH_LOCK_TIMEOUT_S)"
    )


def lock_timeout_default() -> float:
    """`--lock-timeout` when not given: the setting, else the default."""
    value = dlt.config.get(LOCK_TIMEOUT_SETTING)
    return float(value) if value is not None else DEFAULT_LOCK_TIMEOUT_S


def connection_lost(error: BaseException | None) -> bool:
    """True for the driver's errors of a connection refused or lost (Postgres down)."""
    code = getattr(error, "pgcode", None) or ""
    return type(error).__name__ in ("OperationalError", "InterfaceError") and (
        not code or code.startswith(CONNECTION_LOST)
    )


def unreadable(warehouse: Path) -> tuple[int, str] | None:
    """Why the DuckDB warehouse to publish cannot be read (held by a writer, damaged, missing),
    with its exit code, as `status` and `report` say it; None when it opens read-only."""
    if not warehouse.exists():
        return Exit.CONFIG, missing_message(warehouse)
    try:
        duckdb.connect(str(warehouse), read_only=True).close()
    except duckdb.Error as error:
        return open_failure(warehouse, error)
    return None
