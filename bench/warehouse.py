"""Read-only looks into the warehouses after a run: row counts, the run's own log, comparisons.

Also the DuckDB floor (`python -m bench.warehouse floor --src A --dst B --out JSON`): the raw
tables of a loaded warehouse, read into Arrow first (not timed), then written into a fresh DuckDB
file with plain `CREATE TABLE … AS SELECT * FROM <arrow>` (timed, checkpoint included).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import Any

import duckdb
import orjson
from esper_warehouse.sources.esper.common import apps_route

DATASET = "esper"


def _is_raw(table: str) -> bool:
    return not table.startswith(("_dlt", "_esper"))


def raw_tables(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> list[str]:
    """Raw tables of the `esper` dataset (no dlt or run bookkeeping)."""
    where = "table_schema = ? and table_type = 'BASE TABLE'"
    params: list[Any] = [DATASET]
    if catalog:
        where += " and table_catalog = ?"
        params.append(catalog)
    rows = con.execute(
        f"select table_name from information_schema.tables where {where} order by 1", params
    ).fetchall()
    return [name for (name,) in rows if _is_raw(name)]


def table_counts(path: Path) -> dict[str, int]:
    """Rows per raw table of a warehouse file (empty if it does not exist)."""
    if not path.exists():
        return {}
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        return {
            t: con.execute(f'select count(*) from {DATASET}."{t}"').fetchone()[0]  # type: ignore[index]
            for t in raw_tables(con)
        }


def last_run(path: Path) -> dict[str, Any] | None:
    """The pipeline's own record of its latest run (`_esper_runs`), if it keeps one."""
    if not path.exists():
        return None
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        try:
            cursor = con.execute(
                f"select * from {DATASET}._esper_runs order by started_at desc limit 1"
            )
        except duckdb.Error:
            return None
        names = [d[0] for d in cursor.description]
        row = cursor.fetchone()
    if row is None:
        return None
    record = dict(zip(names, row, strict=True))
    rows = record.get("rows")
    if isinstance(rows, str):
        with contextlib.suppress(ValueError):
            record["rows"] = orjson.loads(rows)
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in record.items()}


def rows_loaded(
    path: Path, before: dict[str, int], previous_run_id: object = None
) -> tuple[int, dict[str, int], str]:
    """Rows the last run loaded: from `_esper_runs.rows` if the run recorded itself, else the
    growth of the row counts (which undercounts merged updates).

    Returns (total, per table, source of the figure).
    """
    run = last_run(path)
    recorded = run is not None and run.get("run_id") != previous_run_id
    if run and recorded and isinstance(run.get("rows"), dict):
        per_table = {k: int(v) for k, v in run["rows"].items() if v is not None}
        return sum(per_table.values()), per_table, "_esper_runs.rows"
    after = table_counts(path)
    growth = {t: n - before.get(t, 0) for t, n in after.items()}
    return sum(growth.values()), growth, "row count growth"


def changed_devices(path: Path) -> dict[str, Any] | None:
    """Devices whose `updated_at` moved after the previous ok run's API time (`as_of`).

    Measures how much of the fleet the simulated day changed, which the nightly targets assume
    to be about 2 %, and how much had any activity (a change, a command status or an operation
    row that moved).
    """
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        try:
            as_ofs = [
                r[0]
                for r in con.execute(
                    f"select as_of from {DATASET}._esper_runs where status = 'ok' "
                    "order by started_at"
                ).fetchall()
            ]
            if len(as_ofs) < 2:
                return None
            changed, total = con.execute(
                f"select count(*) filter (where updated_at > ?), count(*) from {DATASET}.devices",
                [as_ofs[-2]],
            ).fetchone()  # type: ignore[misc]
            # Devices with any activity: changed, or a command status or operation row moved.
            # The nightly reads the event feed of each of them, so this share drives its requests.
            (active,) = con.execute(
                f"""
                select count(distinct device_id) from (
                    select id as device_id from {DATASET}.devices where updated_at > $1
                    union all
                    select regexp_extract(device, '[0-9a-f-]{{36}}') from {DATASET}.command_statuses
                    where updated_at > $1
                    union all
                    select device_id from {DATASET}.operation_devices where updated_at > $1
                )
                """,
                [as_ofs[-2]],
            ).fetchone()  # type: ignore[misc]
            # each changed device's own apps route (the nightly reads its apps there)
            apps: dict[str, int] = {}
            for platform, os_ in con.execute(
                f"select platform, os from {DATASET}.devices where updated_at > ?", [as_ofs[-2]]
            ).fetchall():
                route = apps_route({"platform": platform, "os": os_})
                if route is not None:
                    apps[route] = apps.get(route, 0) + 1
        except duckdb.Error:
            return None
    share = lambda n: n / total if total else None  # noqa: E731
    return {
        "changed_apps": apps,
        "changed": changed,
        "active": active,
        "devices": total,
        "share": share(changed),
        "active_share": share(active),
    }


def compare(
    ours: Path, theirs: Path, tables: tuple[str, ...], key: str = "id"
) -> dict[str, dict[str, Any]]:
    """Per table: rows on each side, keys missing from each, and `updated_at` disagreements."""
    out: dict[str, dict[str, Any]] = {}
    with contextlib.closing(duckdb.connect()) as con:
        con.execute(f"attach '{ours}' as ours (read_only)")
        con.execute(f"attach '{theirs}' as theirs (read_only)")
        for table in tables:
            a, b = f'ours.{DATASET}."{table}"', f'theirs.{DATASET}."{table}"'
            try:
                n_a = con.execute(f"select count(*) from {a}").fetchone()[0]  # type: ignore[index]
                n_b = con.execute(f"select count(*) from {b}").fetchone()[0]  # type: ignore[index]
                only_a = con.execute(
                    f"select count(*) from (select {key}::varchar from {a} "
                    f"except select {key}::varchar from {b})"
                ).fetchone()[0]  # type: ignore[index]
                only_b = con.execute(
                    f"select count(*) from (select {key}::varchar from {b} "
                    f"except select {key}::varchar from {a})"
                ).fetchone()[0]  # type: ignore[index]
                cols_b = {r[0] for r in con.execute(f"describe {b}").fetchall()}
                cols_a = {r[0] for r in con.execute(f"describe {a}").fetchall()}
                differ = None
                if "updated_at" in cols_a and "updated_at" in cols_b:
                    differ = con.execute(
                        f"select count(*) from {a} x join {b} y on x.{key}::varchar = "
                        f"y.{key}::varchar where x.updated_at::timestamptz "
                        f"is distinct from y.updated_at::timestamptz"
                    ).fetchone()[0]  # type: ignore[index]
                dup_a = n_a - con.execute(f"select count(distinct {key}) from {a}").fetchone()[0]  # type: ignore[index]
                out[table] = {
                    "ours": n_a,
                    "generic": n_b,
                    "only_ours": only_a,
                    "only_generic": only_b,
                    "updated_at_differs": differ,
                    "duplicate_keys_ours": dup_a,
                    "same": only_a == 0 and only_b == 0 and not differ and dup_a == 0,
                }
            except duckdb.Error as exc:
                out[table] = {"error": f"{type(exc).__name__}: {exc}", "same": False}
    return out


def duckdb_floor(src: Path, dst: Path) -> dict[str, Any]:
    """Write the raw tables of `src` into a fresh DuckDB file from Arrow; time only the writing."""
    with contextlib.closing(duckdb.connect(str(src), read_only=True)) as con:
        arrow = {
            t: con.execute(f'select * from {DATASET}."{t}"').fetch_arrow_table()
            for t in raw_tables(con)
        }
    rows = sum(t.num_rows for t in arrow.values())
    dst.unlink(missing_ok=True)
    started = time.perf_counter()
    con = duckdb.connect(str(dst))
    try:
        con.execute(f"create schema {DATASET}")
        for name, table in arrow.items():
            con.register("batch", table)
            con.execute(f'create table {DATASET}."{name}" as select * from batch')
            con.unregister("batch")
        con.execute("checkpoint")
    finally:
        con.close()
    wall = time.perf_counter() - started
    return {
        "wall_s": wall,
        "rows": rows,
        "rows_per_s": rows / wall if wall > 0 else None,
        "tables": {name: t.num_rows for name, t in arrow.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """`floor --src A --dst B --out JSON`: run the DuckDB floor in a process of its own."""
    parser = argparse.ArgumentParser(prog="python -m bench.warehouse")
    parser.add_argument("action", choices=["floor"])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--dst", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = duckdb_floor(args.src, args.dst)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
