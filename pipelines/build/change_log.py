"""The record of what changed, kept across nights (schema `changes`; sql/changes/README.md).

The models are rebuilt with `create or replace` after every run; the changes a night found must
outlive that rebuild, so they are appended to `changes.change_log`, which `marts.fleet_changes`
reads. `prepare` creates the tables before the models build (the mart's view reads the log);
`record` runs after the marts, in the build's transaction:

1. the subjects' and the families' states now (`subject_states.sql`, `family_states.sql`) into
   temporary tables;
2. this as-of's rows are deleted from the log and the snapshots (a rebuild at the same as-of
   replaces them: idempotent);
3. the changes between the previous snapshot and now (`found.sql`) are appended to the log, and
   the comparison itself to the table `comparisons` (a night without changes is a night too);
4. the snapshot of now is stored (`snapshot_*.sql`) and the snapshots before the previous one are
   deleted, so the cost does not grow with history.

Nothing is recorded before the first loaded run: "now" is then the wall clock, which moves with
every build.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .model_files import ModelError, statements

SCHEMA = "changes"


def _sql(sql_dir: Path, name: str) -> tuple[Path, str]:
    path = sql_dir / SCHEMA / f"{name}.sql"
    return path, path.read_text().strip().rstrip(";")


def _run(con: duckdb.DuckDBPyConnection, path: Path, statement: str) -> None:
    try:
        con.execute(statement)
    except duckdb.Error as exc:
        raise ModelError(path, str(exc)) from exc


def prepare(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> None:
    """Schema `changes` and its log tables (`tables.sql`), created when missing."""
    con.execute(f"create schema if not exists {SCHEMA}")
    path = sql_dir / SCHEMA / "tables.sql"
    for statement in statements(path.read_text()):
        _run(con, path, statement)


def _columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, str]]:
    """`relation`'s columns and types (empty: no such table)."""
    exists = con.execute(
        "select count(*) from duckdb_tables() where database_name || '.' || schema_name || '.' "
        "|| table_name = ? or (temporary and table_name = ?)",
        [f"{_catalog(con)}.{relation}", relation],
    ).fetchone()
    if not exists or not exists[0]:
        return []
    return [(str(row[0]), str(row[1])) for row in con.execute(f"describe {relation}").fetchall()]


def _catalog(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("select current_database()").fetchone()
    return str(row[0]) if row else ""


def _snapshot_table(con: duckdb.DuckDBPyConnection) -> None:
    """The table `subject_states` shaped as `states_now` plus `as_of`. A snapshot of another shape
    (a release that compares more) cannot be compared with now: it is dropped with the families'
    snapshot, so the next night starts a comparison instead of reporting every subject new."""
    shape = "select cast(null as timestamptz) as as_of, * from states_now where false"
    wanted = [("as_of", "TIMESTAMP WITH TIME ZONE"), *_columns(con, "states_now")]
    stored = _columns(con, f"{SCHEMA}.subject_states")
    if stored and stored != wanted:
        con.execute(f"drop table {SCHEMA}.subject_states")
        con.execute(f"delete from {SCHEMA}.family_states")
        stored = []
    if not stored:
        con.execute(f"create table {SCHEMA}.subject_states as {shape}")


def record(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> int:
    """Append the changes found at this build's as-of; return how many rows were appended."""
    row = con.execute("select as_of, loaded_run_count from intermediate.int_as_of").fetchone()
    appended = 0
    if row is None or not row[1]:
        return appended  # nothing loaded yet: no night to compare
    as_of = row[0]
    for name, temp in (("subject_states", "states_now"), ("family_states", "families_now")):
        path, select = _sql(sql_dir, name)
        _run(con, path, f"create or replace temp table {temp} as\n{select}\n")
    _snapshot_table(con)
    for table in ("change_log", "comparisons", "subject_states", "family_states"):
        con.execute(f"delete from {SCHEMA}.{table} where as_of >= ?", [as_of])
    # the snapshot compared with, one row (NULL: none), read by found.sql and the snapshots
    con.execute(
        f"create or replace temp table previous_at as select max(as_of) as as_of "
        f"from {SCHEMA}.family_states where as_of < ?",
        [as_of],
    )
    path, select = _sql(sql_dir, "found")
    _run(con, path, f"insert into {SCHEMA}.change_log by name\n{select}\n")
    con.execute(
        f"insert into {SCHEMA}.comparisons select ?, as_of from temp.previous_at "
        "where as_of is not null",
        [as_of],
    )
    found = con.execute(
        f"select count(*) from {SCHEMA}.change_log where as_of = ?", [as_of]
    ).fetchone()
    for name, table in (
        ("snapshot_states", "subject_states"),
        ("snapshot_families", "family_states"),
    ):
        path, select = _sql(sql_dir, name)
        _run(con, path, f"insert into {SCHEMA}.{table} by name\n{select}\n")
    previous = con.execute("select as_of from temp.previous_at").fetchone()
    if previous is not None and previous[0] is not None:
        for table in ("subject_states", "family_states"):
            con.execute(f"delete from {SCHEMA}.{table} where as_of < ?", [previous[0]])
    for temp in ("states_now", "families_now", "previous_at"):
        con.execute(f"drop table if exists temp.{temp}")
    return int(found[0]) if found else 0
