"""Before/after a restructuring: the warehouse a first load, a nightly and `--full` produce.

Usage: `.venv/bin/python bench/before_after.py <old checkout with its .venv> [out dir]
[--new-only table,...]`. Runs both checkouts' `esper-warehouse run` against two identical
simulators (400 devices, seed 11) and compares `information_schema.columns`, dlt's stored hints
and the row counts after each run. Tables only the new code declares (`--new-only`) are left out
of the comparison.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.simulator import Simulator

KEY, EID = "test-key", "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
NEW_ONLY: set[str] = set()  # tables the old code does not load (`--new-only`)
STEPS = (("first", ()), ("nightly", ()), ("full", ("--full",)))


def run(checkout: str, sim: Simulator, wh: str, out: str, *extra: str) -> int:
    """One `esper-warehouse run` of a checkout; its exit code."""
    env = {
        **os.environ,
        "SOURCES__ESPER__BASE_URL": sim.base_url,
        "SOURCES__ESPER__API_KEY": KEY,
        "SOURCES__ESPER__ENTERPRISE_ID": EID,
    }
    tool = f"{checkout}/.venv/bin/esper-warehouse"
    done = subprocess.run([tool, "run", "--warehouse", wh, *extra], env=env, cwd=out, check=False)
    return done.returncode


def dump(wh: str) -> dict[str, Any]:
    """Columns (schema, table, column, type in order), row counts of `esper.*`, dlt's hints."""
    with duckdb.connect(wh, read_only=True) as con:
        columns = con.execute(
            "select table_schema, table_name, column_name, data_type from information_schema.columns"
            " where table_catalog = current_database() order by 1, 2, ordinal_position"
        ).fetchall()
        tables = con.execute(
            "select table_name from information_schema.tables where table_catalog = "
            "current_database() and table_type = 'BASE TABLE' and table_schema = 'esper'"
        ).fetchall()
        counts = {
            t: con.execute(f'select count(*) from esper."{t}"').fetchone()[0]  # type: ignore[index]
            for (t,) in tables
            if not t.startswith("_dlt")
        }
        # the reconciliation rows of the tables both checkouts load
        counts["_esper_reconciliation"] = con.execute(
            "select count(*) from esper._esper_reconciliation where not list_contains(?, "
            "table_name)",
            [sorted(NEW_ONLY)],
        ).fetchone()[0]  # type: ignore[index]
        row = con.execute("select schema from esper._dlt_version order by inserted_at desc limit 1")
        schema = json.loads(row.fetchone()[0])  # type: ignore[index]
    hints = {
        t: {"write_disposition": v.get("write_disposition"), "columns": v.get("columns", {})}
        for t, v in schema["tables"].items()
        if not t.startswith("_dlt")
    }
    return {"columns": columns, "counts": counts, "hints": hints}


def load_three_times(checkout: str, out: str, name: str) -> dict[str, tuple[int, dict]]:
    """A first load, a nightly a simulated day later, and `--full` a day after that."""
    wh = f"{out}/{name}.duckdb"
    Path(wh).unlink(missing_ok=True)
    results = {}
    with Simulator(devices=400, seed=11, api_key=KEY, enterprise_id=EID) as sim:
        for step, extra in STEPS:
            results[step] = (run(checkout, sim, wh, out, *extra), dump(wh))
            sim.advance(hours=24)
    return results


def compare(step: str, old: tuple[int, dict], new: tuple[int, dict]) -> bool:
    """Print what differs after one step; True when nothing does."""
    (old_code, o), (new_code, n) = old, new
    raw = [[c for c in d["columns"] if c[1] not in NEW_ONLY and c[0] == "esper"] for d in (o, n)]
    models = [
        [c for c in d["columns"] if c[0] != "esper" and not any(t in c[1] for t in NEW_ONLY)]
        for d in (o, n)
    ]
    counts = [{k: v for k, v in d["counts"].items() if k not in NEW_ONLY} for d in (o, n)]
    hints = [{k: v for k, v in d["hints"].items() if k not in NEW_ONLY} for d in (o, n)]
    checks = {
        "exit codes": (old_code, new_code),
        f"raw columns ({len(raw[0])})": raw,
        f"model columns ({len(models[0])})": models,
        "row counts": counts,
        f"dlt stored hints ({len(hints[0])} tables)": hints,
    }
    print(f"== {step}")
    for what, (a, b) in checks.items():
        print(f"  {what}: {'equal' if a == b else 'DIFFERENT'}")
        if a != b and isinstance(a, dict):
            print("   ", {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)})
    return all(a == b for a, b in checks.values())


def main() -> int:
    args = sys.argv[1:]
    if "--new-only" in args:
        at = args.index("--new-only")
        NEW_ONLY.update(filter(None, args[at + 1].split(",")))
        del args[at : at + 2]
    old_checkout = args[0]
    new_checkout = str(Path(__file__).resolve().parents[1])
    out = args[1] if len(args) > 1 else "/tmp/before_after"
    os.makedirs(out, exist_ok=True)
    old = load_three_times(old_checkout, out, "old")
    new = load_three_times(new_checkout, out, "new")
    same = [compare(step, old[step], new[step]) for step, _ in STEPS]
    return 0 if all(same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
