"""Portability guardrails: the marts give the same numbers under other engines' semantics.

The models are built three times from one loaded warehouse: as written; with Postgres'/Redshift's
integer division (DuckDB's `integer_division` setting: `int / int` truncates); with
Snowflake's/BigQuery's `greatest`/`least`, which are NULL when any argument is NULL (the calls are
rewritten to a macro that does that). Every mart must hold the same rows each time, so an uncast
integer ratio or a `greatest` that silently skips a NULL fails here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.build import models

from tests.pipeline.helpers import load

CALL = re.compile(r"\b(greatest|least)\s*\(", re.IGNORECASE)
STRICT = """
create or replace macro strict_greatest(xs) as
    case when list_count(xs) < len(xs) then null else list_max(xs) end;
create or replace macro strict_least(xs) as
    case when list_count(xs) < len(xs) then null else list_min(xs) end;
"""


def strict_nulls(sql: str) -> str:
    """`greatest(a, b)` -> `strict_greatest([a, b])` (NULL when any argument is NULL)."""
    out, i = [], 0
    while match := CALL.search(sql, i):
        out.append(sql[i : match.start()])
        depth, j = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[j], 0)
            j += 1
        inner = strict_nulls(sql[match.end() : j - 1])
        out.append(f"strict_{match.group(1).lower()}([{inner}])")
        i = j
    out.append(sql[i:])
    return "".join(out)


def _marts(path: Path, **config: Any) -> dict[str, list[tuple]]:
    with duckdb.connect(str(path), read_only=True, config=config) as con:
        names = [r[0] for r in con.sql("select table_name from information_schema.tables "
                                       "where table_schema = 'marts' order by 1").fetchall()]  # fmt: skip
        result = {}
        for name in names:
            rows = con.sql(f"select * from marts.{name}").fetchall()
            result[name] = sorted(rows, key=repr)
        return result


def _differences(base: dict[str, list[tuple]], other: dict[str, list[tuple]]) -> list[str]:
    assert set(base) == set(other)
    return [name for name in base if base[name] != other[name]]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from esper_warehouse.simulator import Simulator

    from tests.conftest import API_KEY, ENTERPRISE_ID

    warehouse = tmp_path_factory.mktemp("portable") / "warehouse.duckdb"
    with Simulator(devices=150, seed=11, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        # two nights, the models built on each: marts.fleet_changes holds the second's changes
        assert load(sim, warehouse, build_models=True).exit_code == 0
        sim.advance(24)
        assert load(sim, warehouse).exit_code == 0
    # some devices without any heartbeat: their last-seen time comes from the device record alone
    with duckdb.connect(str(warehouse)) as con:
        con.execute(
            "delete from esper.heartbeats where device_id in "
            "(select id from esper.devices order by id limit 15)"
        )
    models.build_models(warehouse)
    return warehouse


def test_the_marts_do_not_change_with_integer_division(
    loaded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _marts(loaded)
    assert all(base.values()), "every mart has rows, so a changed ratio shows"
    copy = tmp_path / "intdiv.duckdb"
    shutil.copy(loaded, copy)
    connect = duckdb.connect
    monkeypatch.setattr(
        duckdb, "connect", lambda path, **kw: connect(path, config={"integer_division": True})
    )
    models.build_models(copy)
    monkeypatch.undo()
    assert _differences(base, _marts(copy, integer_division=True)) == []


def test_the_marts_do_not_change_when_greatest_and_least_propagate_nulls(
    loaded: Path, tmp_path: Path
) -> None:
    sql_dir = tmp_path / "sql"
    shutil.copytree(models.SQL_DIR, sql_dir)
    rewritten = 0
    for path in [*sql_dir.glob("intermediate/*.sql"), *sql_dir.glob("marts/*.sql")]:
        text = path.read_text()
        strict = strict_nulls(text)
        rewritten += strict != text
        path.write_text(strict)
    (sql_dir / "macros" / "zz_strict_nulls.sql").write_text(STRICT)
    assert rewritten >= 5
    copy = tmp_path / "strict.duckdb"
    shutil.copy(loaded, copy)
    models.build_models(copy, sql_dir=sql_dir, seeds=models.seeds_dir())
    assert _differences(_marts(loaded), _marts(copy)) == []


def test_the_rewrite_makes_a_null_argument_win() -> None:
    sql = "select greatest(a, least(b, c)) as x, greatest(d,\n e) from t"
    assert strict_nulls(sql) == (
        "select strict_greatest([a, strict_least([b, c])]) as x, strict_greatest([d,\n e]) from t"
    )
    with duckdb.connect() as con:
        for statement in STRICT.strip().split(";\n"):
            if statement.strip():
                con.execute(statement)
        assert con.sql("select strict_greatest([1, null]), strict_least([2, 1])").fetchall() == [
            (None, 1)
        ]
