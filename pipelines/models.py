"""Build the SQL models (seeds -> staging -> intermediate -> marts) in a DuckDB warehouse.

The runner is deliberately small and boring:

1. Creates the schemas `seeds`, `staging`, `intermediate`, `marts`.
2. Raw placeholders: for every raw table declared in `sql/raw_schema.sql` that does not exist yet
   in the raw dataset (`esper` by default), creates it empty with the contract's columns
   (docs/contracts.md section 3). Existing raw tables are never touched. So every model builds on
   an empty warehouse, before the first load; dlt later adds its own columns to a placeholder.
3. Loads every `sql/vocabulary/*.csv` (state vocabularies, also read by the loader) and every
   `sql/seeds/*.csv` (the admin's targets) as a table `seeds.<file stem>` (all columns VARCHAR;
   the `stg_seeds__*` views type the targets). Lines starting with `#` are comments.
4. Creates the macros in `sql/macros/*.sql` (version comparison, id from URL, casts, states).
5. Builds `staging`, then `intermediate`, then `marts`. Each `sql/<layer>/<name>.sql` holds one
   `select` and becomes `<layer>.<name>`: a view, or a table when the file contains the line
   `-- materialized: table`. Within a layer, a model that names `<layer>.<other>` is built after
   `<other>`.

Everything runs in one transaction, so a failing model leaves the warehouse as it was, and the
error (`ModelError`) names the file and carries DuckDB's message. `create or replace` makes a
rebuild idempotent. No templating: the only text rewrite is the raw schema name, when the raw
dataset is not called `esper`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
LAYERS = ("staging", "intermediate", "marts")
SCHEMAS = ("seeds", *LAYERS)
SEEDS_ENV = "ESPER_WAREHOUSE__SEEDS_DIR"
RAW_SCHEMA = "esper"
TABLE_SWITCH = re.compile(r"^\s*--\s*materialized:\s*table\s*$", re.MULTILINE | re.IGNORECASE)
RAW_REFERENCE = re.compile(rf"(?<![\w.\"]){RAW_SCHEMA}\.")
CREATE_TABLE = re.compile(r"create\s+table\s+esper\.(\w+)\s*\(", re.IGNORECASE)


class ModelError(RuntimeError):
    """A model (or seed, macro, raw placeholder) failed: the message names the file."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


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


def _create_raw_placeholders(con: duckdb.DuckDBPyConnection, sql_dir: Path, dataset: str) -> None:
    path = sql_dir / "raw_schema.sql"
    catalog = _catalog(con)
    con.execute(f'create schema if not exists "{catalog}"."{dataset}"')
    existing = _existing(con, dataset)
    for statement in _statements(path.read_text()):
        match = CREATE_TABLE.search(statement)
        if match is None:
            raise ModelError(path, f"expected `create table esper.<name> (...)`: {statement[:60]}")
        if match.group(1) in existing:
            continue
        try:
            con.execute(_raw(statement, dataset, catalog))
        except duckdb.Error as exc:
            raise ModelError(path, str(exc)) from exc


def seeds_dir(sql_dir: Path | None = None) -> Path:
    """The folder of compliance-target CSVs: `$ESPER_WAREHOUSE__SEEDS_DIR`, else `sql/seeds/`."""
    configured = os.environ.get(SEEDS_ENV)
    if configured:
        return Path(configured).expanduser()
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
            _create_raw_placeholders(con, sql_dir, dataset)
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
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
    finally:
        con.close()
    return built


def main(argv: list[str] | None = None) -> int:
    """`esper-warehouse models`: build the models and print what was built."""
    parser = argparse.ArgumentParser(
        prog="esper-warehouse models", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--warehouse", default="esper.duckdb", help="DuckDB file (default: %(default)s)"
    )
    parser.add_argument(
        "--dataset", default=RAW_SCHEMA, help="raw dataset schema (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        built = build_models(args.warehouse, dataset=args.dataset)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        print(f"error: {args.warehouse}: {exc}", file=sys.stderr)
        return 1
    for relation in built:
        print(relation)
    print(f"built {len(built)} relations in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
