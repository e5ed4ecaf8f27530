"""Build the SQL models (seeds -> staging -> intermediate -> marts) in a DuckDB warehouse.

The runner is deliberately small and boring:

1. Creates the schemas `seeds`, `staging`, `intermediate`, `marts`.
2. Raw placeholders: for every raw table the source declares (`raw_contract.py`) that does not
   exist yet in the raw dataset (`esper` by default), creates an empty stand-in with its declared
   columns in the schema `raw_placeholders`, and points the staging views at it; an existing raw
   table only gains the declared columns it lacks (a warehouse of an earlier release). So every
   model builds on an empty warehouse, before the first load, and the raw dataset holds only what
   dlt created: the next build after a table's first load reads the table itself. An earlier
   release's empty stand-ins inside the raw dataset are dropped (`raw_contract.earlier_placeholders`).
3. Loads every `sql/vocabulary/*.csv` (state vocabularies, also read by the loader) and every
   `sql/seeds/*.csv` (the admin's targets) as a table `seeds.<file stem>` (all columns VARCHAR;
   the `stg_seeds__*` views type the targets). Lines starting with `#` are comments.
4. Creates the macros in `sql/macros/*.sql` (version comparison, id from URL, casts, states).
5. Builds `staging`, then `intermediate`, then `marts`. Each `sql/<layer>/<name>.sql` holds one
   `select` and becomes `<layer>.<name>`: a view, or a table when the file contains the line
   `-- materialized: table`. Within a layer, a model that names `<layer>.<other>` is built after
   `<other>`.

6. Appends what changed since the previous as-of to `changes.change_log` (`change_log.py`,
   `sql/changes/`): the state the rebuild does not wipe; `marts.fleet_changes` reads it.
7. Runs the data tests of `sql/tests/`: a grain test generated from each line of `grain.csv`
   (for tables and the staging views over seeds; views are grain-tested by the test suite) and
   every `sql/tests/*.sql`, a query that must return no rows. A failure (`DataTestError`) names
   each test file and shows its first five offending rows.

The SQL files are read by pipelines/build/model_files.py, the data tests are pipelines/build/datatests.py.

Everything runs in one transaction, so a failing model or data test leaves the warehouse as it
was, and the error (`ModelError`) names the file and carries DuckDB's message. `create or replace` makes a
rebuild idempotent. No templating: the only text rewrite is the raw schema name, when the raw
dataset is not called `esper`.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import dlt
import duckdb

from ..bookkeeping import unfinished_first_load
from ..warehouse import create_if_missing
from . import change_log, raw_contract
from .datatests import in_build, load_data_tests, run_data_tests
from .model_files import LAYERS, SQL_DIR, Model, ModelError, SeedsMissing, load_models, statements

SCHEMAS = ("seeds", *LAYERS)
SEEDS_ENV = "ESPER_WAREHOUSE__SEEDS_DIR"
RAW_SCHEMA = "esper"
RAW_REFERENCE = re.compile(rf"(?<![\w.\"]){RAW_SCHEMA}\.(\w+)")
# DuckDB's memory for the build: by default it keeps up to 80 % of RAM in its buffers (2.2-3 GB
# for a 150,000-device warehouse, 4 GB at 300,000); with this limit 1.2-1.3 GB, what does not fit
# spilling beside the file. A model's aggregate states must be fixed-size to spill (no list or
# mode per device): docs/decisions.md, "The model build at 150,000 devices".
MODELS_MEMORY = "1GB"


def _raw(text: str, dataset: str, catalog: str, stand_ins: frozenset[str] = frozenset()) -> str:
    """Point `esper.<table>` at the raw dataset, or at its placeholder when it is one of
    `stand_ins` (not loaded yet). When the warehouse file has the dataset's name (`esper.duckdb`
    holds catalog `esper` and schema `esper`), `esper.x` is ambiguous in DuckDB, so the reference
    is qualified with the catalog; such views follow the file name (rebuild after renaming the
    file)."""

    def where(match: re.Match[str]) -> str:
        table = match.group(1)
        if table in stand_ins:  # unqualified: found through whichever catalog reads the view
            return f"{raw_contract.PLACEHOLDERS}.{table}"
        if catalog == dataset:
            return f'"{catalog}"."{dataset}".{table}'
        if dataset != RAW_SCHEMA:
            return f'"{dataset}".{table}'
        return match.group(0)

    return RAW_REFERENCE.sub(where, text)


def _existing(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, str]:
    rows = con.execute(
        "select table_name, table_type from information_schema.tables "
        "where table_catalog = current_database() and table_schema = ?",
        [schema],
    ).fetchall()
    return {name: kind for name, kind in rows}


def _catalog(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("select current_database()").fetchone()
    return str(row[0]) if row else ""


def _create_raw_placeholders(con: duckdb.DuckDBPyConnection, dataset: str) -> frozenset[str]:
    """Each raw table of the contract (`raw_contract.py`): given its missing columns when it
    exists, else stood in for by an empty one in `raw_contract.PLACEHOLDERS`.

    Returns the raw tables stood in for, which the staging views then read there.
    """
    catalog = _catalog(con)
    placeholders = f'"{catalog}".{raw_contract.PLACEHOLDERS}'
    con.execute(f'create schema if not exists "{catalog}"."{dataset}"')
    raw_contract.drop_earlier_placeholders(con, dataset)
    stored = _stored_columns(con, dataset)
    con.execute(f"drop schema if exists {placeholders} cascade")
    missing = {table: columns for table, columns in raw_contract.raw_tables().items()
               if table not in stored}  # fmt: skip
    if missing:
        con.execute(f"create schema {placeholders}")
    for table, columns in raw_contract.raw_tables().items():
        try:
            if table in missing:
                statement = raw_contract.create_statement(table, columns, placeholders)
                con.execute(statement)
            else:
                _add_missing_columns(
                    con, columns, stored[table], f'"{catalog}"."{dataset}"."{table}"'
                )
        except duckdb.Error as exc:
            raise ModelError(Path(raw_contract.__file__), f"{table}: {exc}") from exc
    return frozenset(missing)


def _stored_columns(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, set[str]]:
    """The tables of `schema` in this file, each with its column names (one catalog query)."""
    rows = con.execute(
        "select table_name, column_name from information_schema.columns "
        "where table_catalog = current_database() and table_schema = ?",
        [schema],
    ).fetchall()
    stored: dict[str, set[str]] = {}
    for table, column in rows:
        stored.setdefault(table, set()).add(column)
    return stored


def _add_missing_columns(
    con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]], have: set[str], table: str
) -> None:
    """Give an existing raw table (`have`: its columns) the contract's columns it lacks (nullable,
    empty).

    A warehouse loaded by an earlier release lacks a column the contract gained since (say
    `devices.state_text`) until a load brings one; the staging views must build before that. dlt
    compares its schema with the table's columns in storage before altering it, so it never adds
    such a column a second time.
    """
    for name, type_ in columns:
        if name not in have:
            con.execute(f'alter table {table} add column "{name}" {type_}')


def seeds_dir(sql_dir: Path | None = None) -> Path:
    """The folder of compliance-target CSVs, looked up as dlt looks up a setting.

    `$ESPER_WAREHOUSE__SEEDS_DIR`, else `seeds_dir` in the `[esper_warehouse]` section of
    `.dlt/config.toml` (a relative path there is relative to the folder holding `.dlt/`), else
    `sql/seeds/`.
    """
    configured = os.environ.get(SEEDS_ENV)
    if configured:
        return Path(configured).expanduser()
    value = dlt.config.get("esper_warehouse.seeds_dir")
    if value:
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            path = Path(dlt.current.run_context().run_dir).resolve() / path
        return path
    return (Path(sql_dir) if sql_dir is not None else SQL_DIR) / "seeds"


def _load_seeds(con: duckdb.DuckDBPyConnection, seeds: Path) -> list[str]:
    built = []
    for path in sorted(seeds.glob("*.csv")):
        try:
            con.execute(
                f"create or replace table seeds.{path.stem} as select * from read_csv(?, "
                "header = true, comment = '#', all_varchar = true, delim = ',', quote = '\"')",
                [str(path)],
            )
        except duckdb.Error as exc:
            raise ModelError(path, str(exc)) from exc
        built.append(f"seeds.{path.stem}")
    return built


def _load_table_families(con: duckdb.DuckDBPyConnection) -> str:
    """`seeds.table_families` (table_name, family, family_label) from the source's declarations
    (`raw_contract.table_families`): the freshness models group the raw tables by it."""
    con.execute(
        "create or replace table seeds.table_families "
        "(table_name varchar primary key, family varchar, family_label varchar)"
    )
    con.executemany(
        "insert into seeds.table_families values (?, ?, ?)", raw_contract.table_families()
    )
    return "seeds.table_families"


def create_macros(con: duckdb.DuckDBPyConnection, sql_dir: Path = SQL_DIR) -> None:
    """The macros of `sql/macros/*.sql` (the vocabulary tables must exist: some macros read them).

    Raises ModelError naming the file.
    """
    for path in sorted((sql_dir / "macros").glob("*.sql")):
        for statement in statements(path.read_text()):
            try:
                con.execute(statement)
            except duckdb.Error as exc:
                raise ModelError(path, str(exc)) from exc


def load_vocabulary(con: duckdb.DuckDBPyConnection, sql_dir: Path = SQL_DIR) -> list[str]:
    """`sql/vocabulary/*.csv` as `seeds.<stem>` tables (the schema is created if missing)."""
    con.execute("create schema if not exists seeds")
    return _load_seeds(con, sql_dir / "vocabulary")


def _build_model(
    con: duckdb.DuckDBPyConnection,
    model: Model,
    dataset: str,
    catalog: str,
    existing: str | None,
    stand_ins: frozenset[str] = frozenset(),
) -> None:
    """Create or replace one model; `existing` is the kind of relation (`VIEW`, `BASE TABLE`)
    of that name the build started with, dropped first when the model is now the other kind;
    `stand_ins`: the raw tables a staging view reads from their placeholders."""
    body = model.sql.strip().rstrip(";")
    if model.layer == "staging":
        body = _raw(body, dataset, catalog, stand_ins)
    kind = "table" if model.is_table else "view"
    other = {"table": "view", "view": "table"}[kind]
    if existing is not None and (existing == "VIEW") != (kind == "view"):
        con.execute(f"drop {other} {model.relation}")
    con.execute(f"create or replace {kind} {model.relation} as\n{body}\n")


def build_models(
    warehouse: str | Path,
    *,
    dataset: str = RAW_SCHEMA,
    sql_dir: Path | None = None,
    seeds: Path | None = None,
) -> list[str]:
    """Build every model into `warehouse`; return the relations built, in build order.

    `seeds` is the folder of compliance-target CSVs (default: `seeds_dir(sql_dir)`).

    Raises ModelError (file name + DuckDB's message) and leaves the warehouse unchanged on error.
    """
    seeds = Path(seeds) if seeds is not None else seeds_dir(sql_dir)
    if not seeds.is_dir():
        raise SeedsMissing(seeds, "no such folder of compliance targets (seeds_dir)")
    sql_dir = Path(sql_dir) if sql_dir is not None else SQL_DIR
    plan = [model for layer in LAYERS for model in load_models(sql_dir, layer)]
    create_if_missing(Path(warehouse))
    con = duckdb.connect(str(warehouse))
    try:
        # The device x day spine is generated (generate_series), so DuckDB cannot estimate its
        # size and would run the as-of join of each day's blueprint version
        # (int_device_day_checks) as a nested loop (its small-input plan).
        con.execute("set asof_loop_join_threshold = 0")
        con.execute(f"set memory_limit = '{MODELS_MEMORY}'")
        con.execute("begin transaction")
        try:
            for schema in SCHEMAS:
                con.execute(f"create schema if not exists {schema}")
            stand_ins = _create_raw_placeholders(con, dataset)
            # State vocabularies (sql/vocabulary/, also read by the loader) and the admin's
            # targets, before the macros that read them.
            built = load_vocabulary(con, sql_dir)
            built += _load_seeds(con, seeds)
            built.append(_load_table_families(con))
            create_macros(con, sql_dir)
            # The record of changes outlives the rebuild; marts.fleet_changes reads it.
            change_log.prepare(con, sql_dir)
            catalog = _catalog(con)
            existing = {layer: _existing(con, layer) for layer in {m.layer for m in plan}}
            for model in plan:
                try:
                    kind = existing[model.layer].get(model.name)
                    _build_model(con, model, dataset, catalog, kind, stand_ins)
                except duckdb.Error as exc:
                    raise ModelError(model.path, str(exc)) from exc
                built.append(model.relation)
            change_log.record(con, sql_dir)
            # Data tests (sql/tests/), in the same transaction: a failure rolls everything back.
            tests = load_data_tests(sql_dir, in_build(con, sql_dir))
            run_data_tests(con, tests, sql_dir.parent)
            con.execute("commit")
        except BaseException:
            _rollback(con)
            raise
    finally:
        con.close()
    return built


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll the build back, keeping the error that stopped it the one raised: a commit that
    failed (a full disk) has already ended the transaction, and DuckDB's "cannot rollback - no
    transaction is active" would hide why."""
    with contextlib.suppress(duckdb.Error):
        con.execute("rollback")


def unfinished_load(warehouse: Path, dataset: str) -> str | None:
    """The unfinished first load's message, or None (bookkeeping.unfinished_first_load): the
    models are not built from part of the fleet."""
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return None  # build_models reports why the file cannot be opened
    try:
        return unfinished_first_load(con, f'"{_catalog(con)}"."{dataset}"')
    finally:
        con.close()
