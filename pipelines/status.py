"""`esper-warehouse status`: the last runs, every table's rows and freshness, reconciliation."""

from __future__ import annotations

from pathlib import Path

import duckdb


def status(warehouse: Path, dataset: str = "esper") -> int:
    """Print the warehouse's state; opens the file read-only, briefly."""
    if not warehouse.exists():
        print(f"{warehouse}: no warehouse yet; run `esper-warehouse run` (or `demo`) first")
        return 1
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error as error:
        print(f"{warehouse}: cannot open it ({error})")
        return 5 if "lock" in str(error).lower() else 1
    try:
        print(render(con, dataset))
    finally:
        con.close()
    return 0


def _tables(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    rows = con.execute(
        "select table_name from information_schema.tables where table_schema = ? "
        "order by table_name",
        [dataset],
    ).fetchall()
    return [r[0] for r in rows]


def render(con: duckdb.DuckDBPyConnection, dataset: str) -> str:
    tables = _tables(con, dataset)
    catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
    ds = f'"{catalog}"."{dataset}"'  # a file named like the dataset makes `esper.x` ambiguous
    out: list[str] = []
    if "_esper_runs" in tables:
        out.append("last runs:")
        for row in con.execute(
            f"select started_at, as_of, mode, status, requests, retries, throttled "
            f"from {ds}._esper_runs order by started_at desc limit 10"
        ).fetchall():
            out.append(
                f"  {row[0]:%Y-%m-%d %H:%M}  as of {row[1]}  {row[2]:<11} {row[3]:<22} "
                f"requests {row[4]}, retries {row[5]}, 429s {row[6]}"
            )
    else:
        out.append("no runs recorded yet")
    out.append("tables (rows, last loaded):")
    loads = "_dlt_loads" in tables
    for table in tables:
        if table.startswith("_"):
            continue
        columns = {
            r[0]
            for r in con.execute(
                "select column_name from information_schema.columns "
                "where table_schema = ? and table_name = ?",
                [dataset, table],
            ).fetchall()
        }
        count = con.execute(f'select count(*) from {ds}."{table}"').fetchone()[0]
        fresh = ""
        if loads and "_dlt_load_id" in columns:
            fresh = con.execute(
                f'select max(l.inserted_at) from {ds}."{table}" t '
                f"join {ds}._dlt_loads l on l.load_id = t._dlt_load_id"
            ).fetchone()[0]
        out.append(f"  {table:<28} {count:>10,}  {fresh or ''}")
    if "_esper_reconciliation" in tables:
        out.append("reconciliation (latest run):")
        for row in con.execute(
            f"select table_name, expected, loaded, missing, ok from "
            f"{ds}._esper_reconciliation where run_id = (select run_id from "
            f"{ds}._esper_reconciliation order by checked_at desc limit 1) order by 1"
        ).fetchall():
            flag = "ok" if row[4] else "SHORT"
            out.append(f"  {row[0]:<28} expected {row[1]:>8}  loaded {row[2]:>8}  {flag}")
    return "\n".join(out)
