"""The documents' queries (README.md and the pages under docs/: `tests.docs`) run as pasted: every
SQL block on the demo warehouse, and no shell command holds a `[--option]`. The warehouse guide's
"Worst command rollouts" query ranks as marts.headlines (the demo's "three worst command
rollouts" and the report's "Most failing" table read the same `failing_rank`); its two Esper
Pipelines questions answer as the staging views and `marts.pipeline_rollout` say."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from tests.docs import every_page, page, pages

ROOT = Path(__file__).resolve().parents[2]


def _readme_query(title: str) -> str:
    """The documents' query under the comment line that starts with `-- <title>`."""
    match = re.search(rf"-- {re.escape(title)}.*?\n(select .*?);", every_page(), re.S)
    assert match, f"no page has a '{title}' query"
    return match.group(1)


def _readme_worst_rollouts() -> str:
    return _readme_query("Worst command rollouts")


def test_readme_worst_rollouts_start_with_the_headlines_three(demo_warehouse: Path) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_worst_rollouts()).fetchall()
        worst = con.execute(
            "select item_rank, label, denominator from marts.headlines "
            "where headline = 'worst_command_rollouts' order by item_rank"
        ).fetchall()
    assert len(worst) == 3
    assert [(row[0], row[1], row[3]) for row in readme[:3]] == worst


def test_readme_which_stage_is_each_rollout_in(demo_warehouse: Path) -> None:
    """One row per pipeline that has run: its latest run, at the last stage it has reached (as
    the stage runs say), with what that stage does and to whom (as its lists say)."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_query("Which stage is each rollout in?")).fetchall()
        expected = con.execute("""
            with latest as (
                select * from staging.stg_esper__pipeline_runs
                qualify row_number() over (partition by pipeline_id order by run_number desc) = 1
            ),
            reached as (
                select latest.pipeline_run_id, max(stages.stage_order) as stage_order
                from latest
                join staging.stg_esper__pipeline_stage_runs as runs using (pipeline_run_id)
                join staging.stg_esper__pipeline_stages as stages using (stage_id)
                group by all
            ),
            planned as (
                select stage_id, count(*) as planned_targets, min(target_list_type) as kind
                from staging.stg_esper__pipeline_stage_targets group by stage_id
            )
            select latest.pipeline_name, latest.run_number, latest.status, reached.stage_order,
                   stages.stage_name, lower(planned.kind), planned.planned_targets
            from latest
            left join reached using (pipeline_run_id)
            left join staging.stg_esper__pipeline_stages as stages
                on stages.pipeline_id = latest.pipeline_id
                and stages.stage_order = reached.stage_order
            left join planned on planned.stage_id = stages.stage_id
            order by latest.pipeline_name
        """).fetchall()
    assert [(r[0], r[1], r[2], r[3], r[5], r[10], r[11]) for r in readme] == expected
    assert len(readme) >= 3 and {r[2] for r in readme} >= {"waiting"}


def test_readme_which_devices_failed_stage_2_and_why(demo_warehouse: Path) -> None:
    """Every device that failed or timed out in stage 2 of a pipeline's latest run, each once:
    as many as the rollout mart counts, with its reasons counted as the mart counts them."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_query("Which devices failed stage 2")).fetchall()
        stages = con.execute("""
            select rollout.pipeline_name, rollout.failed_devices + rollout.timed_out_devices,
                   rollout.top_failure_reasons
            from marts.pipeline_rollout as rollout
            join marts.pipeline_rollout_current using (pipeline_run_id)
            where rollout.stage_order = 2
        """).fetchall()
    assert readme, "the demo's latest runs have failures in stage 2"
    assert len({r[4] for r in readme}) == len(readme)  # each device once
    for pipeline, failed, reasons in stages:
        rows = [r for r in readme if r[0] == pipeline]
        assert len(rows) == failed, pipeline
        for top in reasons:  # the mart's top reasons: the same devices, by name
            named = sorted(r[3] for r in rows if r[6] == top["reason"])
            assert len(named) == top["devices"] and named[:3] == top["device_names"]


def test_readme_which_tables_are_behind(demo_warehouse: Path) -> None:
    """One row per table family; on the demo every family is current (no age note) but the device
    census, which only full scans read (the demo's nightlies are incremental)."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_query("Which tables are behind, and why?")).fetchall()
        families = con.execute("select family_label from seeds.table_families").fetchall()
    labels = {row[0] for row in readme}
    assert labels >= {row[0] for row in families}
    assert all(label.startswith("Data Tap ") for label in labels - {r[0] for r in families})
    assert all(row[1] is not None for row in readme), readme
    behind = {row[0]: row[3] for row in readme if row[3] is not None}
    assert set(behind) <= {"Device census (full scans)"}, behind
    assert all("not read by the runs since" in note for note in behind.values())


def test_readme_compliance_trend_covers_the_last_30_days_of_the_data(demo_warehouse: Path) -> None:
    """Dated from the data's own "now" (`marts.headlines.as_of`), never the reader's clock: on
    the simulator's warehouse, whose clock is not today's, it returns every day it holds."""
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        readme = con.execute(_readme_query("Compliance trend per platform")).fetchall()
        days = con.execute(
            "select count(distinct day) from marts.fleet_compliance_daily, "
            "(select max(as_of)::date as today from marts.headlines) "
            "where day between today - 30 and today"
        ).fetchone()[0]  # type: ignore[index]
    assert days >= 3, "the demo warehouse holds three nights"
    assert len({day for day, *_ in readme}) == days
    assert all(rate is None or 0 <= rate <= 1 for *_, rate in readme)


def test_every_sql_block_of_every_page_runs_on_the_demo_warehouse(demo_warehouse: Path) -> None:
    """Each statement of each ```sql block, as pasted: it binds and runs on a warehouse the demo
    built (a block that names a column a mart no longer has fails here)."""
    ran = 0
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        for name in pages():
            for block in re.findall(r"```sql\n(.*?)```", page(name), re.S):
                for statement in filter(str.strip, _statements(block)):
                    try:
                        con.execute(statement).fetchall()
                    except duckdb.Error as exc:
                        raise AssertionError(f"{name}: {statement}\n{exc}") from exc
                    ran += 1
    assert ran >= 15  # the pages hold 18 statements


def _statements(block: str) -> list[str]:
    """A block's statements: its comment lines dropped, split at each `;` ending a line."""
    text = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return re.split(r";[ \t]*(?:--[^\n]*)?$", text, flags=re.M)


def _commands(block: str) -> list[str]:
    """The commands of a shell block: continued lines joined, comments and quoted
    strings left out (a `[...]` inside quotes is the command's own text)."""
    text = re.sub(r"\\\n", " ", block)
    lines = [re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines()]
    return [re.sub(r"'[^']*'|\"[^\"]*\"", "''", line) for line in lines if line.strip()]


def test_readme_shell_blocks_run_as_pasted() -> None:
    """No `[--option value]` in a command: pasted, the shell passes the brackets on (or globs
    them) and the command refuses its words. Optional words are said in a comment."""
    readme = every_page()
    blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", readme, re.S)
    assert blocks
    bracketed = [c for b in blocks for c in _commands(b) if re.search(r"\[[^\]]*\]", c)]
    assert bracketed == []
