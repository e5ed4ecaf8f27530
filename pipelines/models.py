"""Build the SQL models (seeds -> staging -> intermediate -> marts) in a DuckDB warehouse.

The runner is deliberately small and boring:

1. Creates the schemas `seeds`, `staging`, `intermediate`, `marts`.
2. Raw placeholders: for every raw table the source declares (`raw_contract.py`) that does not
   exist yet in the raw dataset (`esper` by default), creates it empty with its declared columns;
   an existing raw table only gains the declared columns it lacks
   (a warehouse of an earlier release). So every model builds on an empty warehouse, before the
   first load; dlt later adds its own columns to a placeholder.
3. Loads every `sql/vocabulary/*.csv` (state vocabularies, also read by the loader) and every
   `sql/seeds/*.csv` (the admin's targets) as a table `seeds.<file stem>` (all columns VARCHAR;
   the `stg_seeds__*` views type the targets). Lines starting with `#` are comments.
4. Creates the macros in `sql/macros/*.sql` (version comparison, id from URL, casts, states).
5. Builds `staging`, then `intermediate`, then `marts`. Each `sql/<layer>/<name>.sql` holds one
   `select` and becomes `<layer>.<name>`: a view, or a table when the file contains the line
   `-- materialized: table`. Within a layer, a model that names `<layer>.<other>` is built after
   `<other>`.

6. Runs the data tests of `sql/tests/`: a grain test generated from each line of `grain.csv`
   (for tables and the staging views over seeds; views are grain-tested by the test suite) and
   every `sql/tests/*.sql`, a query that must return no rows. A failure (`DataTestError`) names
   each test file and shows its first five offending rows.

Everything runs in one transaction, so a failing model or data test leaves the warehouse as it
was, and the error (`ModelError`) names the file and carries DuckDB's message. `create or replace` makes a
rebuild idempotent. No templating: the only text rewrite is the raw schema name, when the raw
dataset is not called `esper`.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from esper_warehouse import data_path

from . import raw_contract
from .exit_codes import Exit

SQL_DIR = data_path("sql")
LAYERS = ("staging", "intermediate", "marts")
SCHEMAS = ("seeds", *LAYERS)
SEEDS_ENV = "ESPER_WAREHOUSE__SEEDS_DIR"
RAW_SCHEMA = "esper"
TABLE_SWITCH = re.compile(r"^\s*--\s*materialized:\s*table\s*$", re.MULTILINE | re.IGNORECASE)
RAW_REFERENCE = re.compile(rf"(?<![\w.\"]){RAW_SCHEMA}\.")


class ModelError(RuntimeError):
    """A model (or seed, macro, raw placeholder) failed: the message names the file."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class SeedsMissing(ModelError):
    """The configured folder of compliance targets does not exist."""


@dataclass(frozen=True)
class Model:
    layer: str
    name: str
    path: Path
    sql: str

    @property
    def relation(self) -> str:
        return f"{self.layer}.{self.name}"

    @property
    def is_table(self) -> bool:
        return bool(TABLE_SWITCH.search(self.sql))


def _statements(text: str) -> list[str]:
    """Split a file of DDL statements on `;` at line ends (the files hold no such literals)."""
    parts = re.split(r";\s*(?:--[^\n]*)?\n", text + "\n")
    out = []
    for part in parts:
        code = "\n".join(line for line in part.splitlines() if not line.strip().startswith("--"))
        if code.strip():
            out.append(part.strip().rstrip(";"))
    return out


def _raw(text: str, dataset: str, catalog: str) -> str:
    """Point `esper.<table>` at the raw dataset. When the warehouse file has the dataset's name
    (`esper.duckdb` holds catalog `esper` and schema `esper`), `esper.x` is ambiguous in DuckDB, so
    the reference is qualified with the catalog; such views follow the file name (rebuild after
    renaming the file)."""
    if catalog == dataset:
        return RAW_REFERENCE.sub(f'"{catalog}"."{dataset}".', text)
    if dataset != RAW_SCHEMA:
        return RAW_REFERENCE.sub(f'"{dataset}".', text)
    return text


def load_models(sql_dir: Path, layer: str) -> list[Model]:
    """The models of one layer, in build order (a model after the same-layer models it names)."""
    models = {
        path.stem: Model(layer, path.stem, path, path.read_text())
        for path in sorted((sql_dir / layer).glob("*.sql"))
    }
    deps = {
        name: {
            other
            for other in models
            if other != name and re.search(rf"\b{layer}\.{other}\b", model.sql)
        }
        for name, model in models.items()
    }
    ordered: list[Model] = []
    done: set[str] = set()
    while len(done) < len(models):
        ready = sorted(name for name in models if name not in done and deps[name] <= done)
        if not ready:
            stuck = sorted(set(models) - done)
            raise ModelError(sql_dir / layer, f"circular references between {stuck}")
        for name in ready:
            ordered.append(models[name])
            done.add(name)
    return ordered


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


def _create_raw_placeholders(con: duckdb.DuckDBPyConnection, dataset: str) -> None:
    """Each raw table of the contract (`raw_contract.py`): created empty, or given its columns."""
    catalog = _catalog(con)
    con.execute(f'create schema if not exists "{catalog}"."{dataset}"')
    existing = _existing(con, dataset)
    for table, columns in raw_contract.raw_tables().items():
        try:
            if table in existing:
                _add_missing_columns(con, columns, table, dataset, catalog)
            else:
                statement = raw_contract.create_statement(table, columns)
                con.execute(_raw(statement, dataset, catalog))
        except duckdb.Error as exc:
            raise ModelError(Path(raw_contract.__file__), f"{table}: {exc}") from exc


def _add_missing_columns(
    con: duckdb.DuckDBPyConnection,
    columns: list[tuple[str, str]],
    table: str,
    dataset: str,
    catalog: str,
) -> None:
    """Give an existing raw table the contract's columns it lacks (nullable, empty).

    A warehouse loaded by an earlier release lacks a column the contract gained since (say
    `devices.state_text`) until a load brings one; the staging views must build before that. dlt
    compares its schema with the table's columns in storage before altering it, so it never adds
    such a column a second time.
    """
    have = {
        name
        for (name,) in con.execute(
            "select column_name from information_schema.columns where table_catalog = "
            "current_database() and table_schema = ? and table_name = ?",
            [dataset, table],
        ).fetchall()
    }
    for name, type_ in columns:
        if name not in have:
            con.execute(
                f'alter table "{catalog}"."{dataset}"."{table}" add column "{name}" {type_}'
            )


def seeds_dir(sql_dir: Path | None = None) -> Path:
    """The folder of compliance-target CSVs, looked up as dlt looks up a setting.

    `$ESPER_WAREHOUSE__SEEDS_DIR`, else `seeds_dir` in the `[esper_warehouse]` section of
    `.dlt/config.toml` (a relative path there is relative to the folder holding `.dlt/`), else
    `sql/seeds/`.
    """
    configured = os.environ.get(SEEDS_ENV)
    if configured:
        return Path(configured).expanduser()
    import dlt  # only when the environment does not say: dlt takes ~0.4 s to import

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


def create_macros(con: duckdb.DuckDBPyConnection, sql_dir: Path = SQL_DIR) -> None:
    """The macros of `sql/macros/*.sql` (the vocabulary tables must exist: some macros read them).

    Raises ModelError naming the file.
    """
    for path in sorted((sql_dir / "macros").glob("*.sql")):
        for statement in _statements(path.read_text()):
            try:
                con.execute(statement)
            except duckdb.Error as exc:
                raise ModelError(path, str(exc)) from exc


def load_vocabulary(con: duckdb.DuckDBPyConnection, sql_dir: Path = SQL_DIR) -> list[str]:
    """`sql/vocabulary/*.csv` as `seeds.<stem>` tables (the schema is created if missing)."""
    con.execute("create schema if not exists seeds")
    return _load_seeds(con, sql_dir / "vocabulary")


# --- data tests (sql/tests/) ----------------------------------------------------------------

TESTS = "tests"
GRAIN_FILE = "grain.csv"
SHOWN_ROWS = 5
SEED_VIEW = "staging.stg_seeds__"


@dataclass(frozen=True)
class Grain:
    """One line of `sql/tests/grain.csv`: the columns that identify a row of a relation."""

    relation: str
    keys: tuple[str, ...]
    nullable: frozenset[str]


@dataclass(frozen=True)
class DataTest:
    """A query that must return no rows; `describe` turns an offending row into a sentence."""

    name: str
    path: Path
    sql: str
    describe: Callable[[dict[str, Any]], str] | None = None


@dataclass(frozen=True)
class Failure:
    test: DataTest
    rows: int
    shown: list[str]


class DataTestError(ModelError):
    """Data tests failed: the build was rolled back; the message names each test and its rows."""

    def __init__(self, failures: list[Failure], root: Path) -> None:
        self.failures = failures
        self.path = failures[0].test.path
        lines = [
            f"{len(failures)} data test(s) failed; the build was rolled back and the warehouse "
            "is exactly as it was before it:"
        ]
        for failure in failures:
            lines.append(
                f"  {_shown_path(failure.test.path, root)} ({failure.test.name}): "
                f"{failure.rows} offending row(s)"
                + (f", the first {len(failure.shown)}" if failure.rows > len(failure.shown) else "")
                + ":"
            )
            lines += [f"    {text}" for text in failure.shown]
        RuntimeError.__init__(self, "\n".join(lines))


def _shown_path(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def load_grains(sql_dir: Path = SQL_DIR) -> list[Grain]:
    """The grains declared in `sql/tests/grain.csv` (lines starting with `#` are comments)."""
    path = sql_dir / TESTS / GRAIN_FILE
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    grains = []
    for row in csv.DictReader(lines):
        relation = (row.get("relation") or "").strip()
        if not relation:
            continue
        if relation.count(".") != 1:
            raise ModelError(path, f"relation {relation!r} is not `schema.name`")
        keys = tuple((row.get("grain") or "").split())
        nullable = frozenset((row.get("nullable") or "").split())
        if not nullable <= set(keys):
            raise ModelError(path, f"{relation}: nullable {sorted(nullable)} not in its grain")
        grains.append(Grain(relation, keys, nullable))
    return grains


def _seed_file(sql_dir: Path, relation: str) -> str | None:
    """`seed <file>.csv` / `vocabulary <file>.csv` for a seed table or a staging view over one."""
    schema, name = relation.split(".")
    if relation.startswith(SEED_VIEW):
        found = re.search(r"\bseeds\.(\w+)", (sql_dir / "staging" / f"{name}.sql").read_text())
        if found is None:
            return None
        name = found.group(1)
    elif schema != "seeds":
        return None
    kind = "vocabulary" if (sql_dir / "vocabulary" / f"{name}.csv").exists() else "seed"
    return f"{kind} {name}.csv"


def grain_test(grain: Grain, sql_dir: Path = SQL_DIR) -> DataTest:
    """The data test of a grain: no two rows share the key, no key column is NULL (unless nullable)."""
    path = sql_dir / TESTS / GRAIN_FILE
    name = f"{grain.relation}: one row per {', '.join(grain.keys) or 'warehouse'}"
    if not grain.keys:
        sql = f"select count(*) as row_count from {grain.relation} having count(*) <> 1"
        return DataTest(
            name, path, sql, lambda row: f"{grain.relation} has {row['row_count']} rows, expected 1"
        )
    keys = ", ".join(f'"{key}"' for key in grain.keys)
    nulls = " or ".join(f'"{key}" is null' for key in grain.keys if key not in grain.nullable)
    having = "count(*) > 1" + (f" or {nulls}" if nulls else "")
    sql = (
        f"select {keys}, count(*) as row_count from {grain.relation} group by {keys} "
        f"having {having} order by row_count desc"
    )
    source = _seed_file(sql_dir, grain.relation)

    def describe(row: dict[str, Any]) -> str:
        missing = [k for k in grain.keys if row[k] is None and k not in grain.nullable]
        where = source or grain.relation
        if missing:
            return f"{where} has {row['row_count']} row(s) with no {' and no '.join(missing)}"
        values = ", ".join(f"{k} {row[k]}" for k in grain.keys)
        if source:
            return (
                f"{source} has {row['row_count']} rows for {values}; each "
                f"{' and '.join(grain.keys)} must appear once"
            )
        return (
            f"{grain.relation} has {row['row_count']} rows for {values}; its grain is one row "
            f"per {', '.join(grain.keys)}"
        )

    return DataTest(name, path, sql, describe)


def load_data_tests(sql_dir: Path = SQL_DIR, grains: list[Grain] | None = None) -> list[DataTest]:
    """The grain tests of `grains` (default: all of grain.csv), then every `sql/tests/*.sql`."""
    grains = load_grains(sql_dir) if grains is None else grains
    tests = [grain_test(grain, sql_dir) for grain in grains]
    for path in sorted((sql_dir / TESTS).glob("*.sql")):
        tests.append(DataTest(path.stem, path, path.read_text().strip().rstrip(";")))
    return tests


def _in_build(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> list[Grain]:
    """The grains the build tests: tables, and the staging views over seeds (a few rows each)."""
    tables = {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_catalog = current_database() and table_type = 'BASE TABLE'"
        ).fetchall()
    }
    return [
        g for g in load_grains(sql_dir) if g.relation in tables or g.relation.startswith(SEED_VIEW)
    ]


def run_data_tests(
    con: duckdb.DuckDBPyConnection, tests: list[DataTest], root: Path | None = None
) -> None:
    """Run each test; raise DataTestError listing every failing one with its first rows.

    Raises ModelError naming the file when a test's query itself fails.
    """
    failures = []
    for test in tests:
        try:
            cursor = con.execute(f"select * from (\n{test.sql}\n) as offending")
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchmany(SHOWN_ROWS)]
            if not rows:
                continue
            more = con.execute(f"select count(*) from (\n{test.sql}\n) as offending").fetchone()
        except duckdb.Error as exc:
            raise ModelError(test.path, f"data test {test.name}: {exc}") from exc
        failures.append(
            Failure(test, int(more[0]) if more else len(rows), [_row_text(test, r) for r in rows])
        )
    if failures:
        raise DataTestError(failures, root if root is not None else SQL_DIR.parent)


def _row_text(test: DataTest, row: dict[str, Any]) -> str:
    if test.describe is not None:
        return test.describe(row)
    if "problem" in row:
        return str(row["problem"])
    return ", ".join(f"{name} {value!r}" for name, value in row.items())


def _build_model(con: duckdb.DuckDBPyConnection, model: Model, dataset: str) -> None:
    body = model.sql.strip().rstrip(";")
    if model.layer == "staging":
        body = _raw(body, dataset, _catalog(con))
    kind = "table" if model.is_table else "view"
    other = {"table": "view", "view": "table"}[kind]
    existing = _existing(con, model.layer).get(model.name)
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
    con = duckdb.connect(str(warehouse))
    try:
        # The device x day spine is generated (generate_series), so DuckDB cannot estimate its
        # size and would run an as-of join on it as a nested loop (its small-input plan).
        con.execute("set asof_loop_join_threshold = 0")
        con.execute("begin transaction")
        try:
            for schema in SCHEMAS:
                con.execute(f"create schema if not exists {schema}")
            _create_raw_placeholders(con, dataset)
            # State vocabularies (sql/vocabulary/, also read by the loader) and the admin's
            # targets, before the macros that read them.
            built = load_vocabulary(con, sql_dir)
            built += _load_seeds(con, seeds)
            create_macros(con, sql_dir)
            for model in plan:
                try:
                    _build_model(con, model, dataset)
                except duckdb.Error as exc:
                    raise ModelError(model.path, str(exc)) from exc
                built.append(model.relation)
            # Data tests (sql/tests/), in the same transaction: a failure rolls everything back.
            tests = load_data_tests(sql_dir, _in_build(con, sql_dir))
            run_data_tests(con, tests, sql_dir.parent)
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
    finally:
        con.close()
    return built


EXIT_UNFINISHED = Exit.UNFINISHED  # the data is incomplete, as for a reconciliation shortfall


def _unfinished(warehouse: Path, dataset: str) -> str | None:
    """The unfinished first load's message, or None (bookkeeping.unfinished_first_load)."""
    from .bookkeeping import unfinished_first_load

    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return None  # build_models reports why the file cannot be opened
    try:
        return unfinished_first_load(con, f'"{_catalog(con)}"."{dataset}"')
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    """`esper-warehouse models`: build the models and print what was built.

    Exit codes: 0 built; 1 a model or data test failed (nothing changed); 2 no such warehouse
    file (unless --create) or no seeds folder; 4 a first load is unfinished (nothing built);
    5 the file is held by another process.
    """
    from .cli import apply_options, shared_options
    from .status import missing_message, open_failure

    parser = argparse.ArgumentParser(
        prog="esper-warehouse models",
        description=__doc__.split("\n")[0],
        parents=shared_options(),
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="build into a new, empty warehouse file when there is none (default: exit 2)",
    )
    args = parser.parse_args(argv)
    apply_options(args)
    warehouse: Path = args.warehouse
    if not warehouse.exists() and not args.create:
        print(f"error: {missing_message(warehouse)} (or pass --create)", file=sys.stderr)
        return Exit.CONFIG
    if warehouse.exists() and (unfinished := _unfinished(warehouse, args.dataset)):
        print(f"error: {unfinished}; no model was built from part of the fleet", file=sys.stderr)
        return EXIT_UNFINISHED
    started = time.perf_counter()
    try:
        built = build_models(warehouse, dataset=args.dataset)
    except SeedsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.CONFIG
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.FAILED
    except duckdb.Error as exc:
        code, message = open_failure(warehouse, exc)
        print(f"error: {message}", file=sys.stderr)
        return code
    for relation in built:
        print(relation)
    print(f"built {len(built)} relations in {time.perf_counter() - started:.2f} s into {warehouse}")
    return Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
