"""Nothing is cut in silence (issue 41): every list of the report, a table or a chart, shows every
item its mart holds, or says "N of M" (a chart in its title, a table in its label) and shows
exactly N of the mart's M. Counted as a reader counts them, in headless Chromium's rendering:
a table's rows (open and closed), a chart's drawn marks (the bars under each label of its band
axis, the days its marks reach on a time axis, the lines its legend names), never the data the
page was given. Every chart and every table of every page is listed here: one the test does not
know fails until it says which mart it lists."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.views import report

from .drawn import View, charts, stacks
from .test_offline_report import Shown, _tables

PAGES = [nb.stem for nb in report.notebooks()]
CUT = re.compile(r"(?:^|\(|first )([\d,]+) of ([\d,]+)\b")

GROUPS = "select count(*) from (select distinct group_path from marts.fleet_compliance)"
DAYS = "select count(distinct day) from marts.fleet_compliance_daily"
COMMANDS = "select count(*) from marts.command_rollout where target_devices > 0"
OPERATIONS = "select count(*) from marts.operation_rollout where target_devices > 0"
TAP = "esper.data_tap__device_stats_daily"


@dataclass(frozen=True)
class Listed:
    """A chart's list: how its drawing shows one item, how many its mart holds, and the table
    on the same page (its first columns) that holds every item when the chart shows fewer."""

    counted_by: str  # "bands", "days" or "legend"
    mart_sql: str
    rest: tuple[str, ...] | None = None


# Every chart of every page, by the start of its title.
CHARTS: dict[str, dict[str, Listed]] = {
    "fleet_overview": {
        "Devices by platform": Listed(
            "bands", "select count(distinct platform) from marts.fleet_compliance"
        ),
        "Devices by group": Listed("bands", GROUPS, rest=("group_path", "devices")),
        "Verdict by platform": Listed(
            "bands",
            "select count(distinct platform) from marts.fleet_compliance where is_in_service",
        ),
        "Compliance rate": Listed("days", DAYS),
        "Devices by verdict": Listed("days", DAYS),
        "Why devices are non-compliant": Listed(
            "bands", "select count(*) from marts.headlines where headline = 'top_reasons'"
        ),
        "Devices by last check-in": Listed(
            "bands", "select count(distinct last_seen_bucket) from marts.fleet_compliance"
        ),
    },
    "rollouts": {
        "Pipeline runs not ended": Listed(
            "bands",
            "select count(distinct pipeline_run_id) from marts.pipeline_rollout where is_run_open",
        ),
        "Apps now": Listed(
            "bands", "select count(*) from marts.app_rollout_current", rest=("app_name",)
        ),
        "Version adoption over time": Listed(
            "days", "select count(distinct day) from marts.app_rollout"
        ),
        # a line per current version (app_version_rollout.is_latest_version), named in the legend
        "Adoption of the current versions": Listed(
            "legend",
            "select count(*) from marts.app_version_rollout where is_latest_version",
            rest=("app_name", "package_name"),
        ),
        "Command outcomes per request": Listed(
            "bands", COMMANDS, rest=("failing_rank", "label", "target_devices")
        ),
        "Time to completion of command requests": Listed(
            "bands",
            f"{COMMANDS} and p90_minutes_to_terminal is not null",
            rest=("failing_rank", "label", "target_devices"),
        ),
        "Operation outcomes": Listed("bands", OPERATIONS, rest=("failing_rank", "label", "state")),
        "Time to completion of operations": Listed(
            "bands",
            f"{OPERATIONS} and p90_minutes_to_terminal is not null",
            rest=("failing_rank", "label", "state"),
        ),
    },
    "data_tap": {
        # the demo's query: a line per device, named as the page names it
        "battery_level by report_date and device": Listed(
            "legend",
            "select count(distinct coalesce(d.device_name, t.device_id::varchar)) "
            f"from {TAP} as t left join intermediate.int_devices_current as d "
            "on d.device_id = t.device_id",
            rest=("device_id", "report_date"),
        ),
    },
}

FIRST_FAILING = "(select {key} from marts.{mart} where failing_rank = 1)"
# Every table of every page, in page order: its first columns and its mart's rows.
TABLES: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "fleet_overview": [
        (("family", "data_as_of"), "select count(*) from intermediate.int_family_freshness"),
        (("as_of (UTC)", "change", "subject"),  # the last 7 nights compared, as it opens
         "select count(*) from marts.fleet_changes where as_of in "
         "(select as_of from changes.comparisons order by as_of desc limit 7)"),
        (("group_path", "devices"), GROUPS),
        (("device_name", "platform", "group_path", "reasons"),
         "select count(*) from marts.fleet_compliance where verdict = 'non_compliant'"),
        (("device_name", "platform", "group_path", "last_seen_bucket"),
         "select count(*) from marts.stale_devices"),
        (("status", "credential_kind"),
         "select count(*) from marts.credential_expiry "
         "where status in ('expired', 'expiring', 'unreadable')"),
        (("disagreement",), "select count(*) from marts.drift_disagreements"),
        (("disagreement", "device_name"), "select count(*) from marts.security_disagreements"),
        (("name", "email"), "select count(*) from marts.fleet_access"),
    ],
    "rollouts": [
        (("pipeline_name", "run_number", "run_status", "current_stage"),
         "select count(*) from marts.pipeline_rollout_current"),
        (("pipeline_name", "run_number", "stage"),
         "select count(*) from (select unnest(top_failure_reasons) "
         "from marts.pipeline_rollout where is_failing)"),
        (("app_name", "package_name"), "select count(*) from marts.app_rollout_current"),
        (("failing_rank", "label", "target_devices"), f"{COMMANDS} and failing_rank is not null"),
        (("failing_rank", "label", "target_devices"), COMMANDS),
        # the devices of the request picked: the most failing one
        (("device_name", "platform", "group_path", "state"),
         "select count(distinct device_id) from staging.stg_esper__command_statuses "
         "where command_request_id = "
         + FIRST_FAILING.format(key="command_request_id", mart="command_rollout")),
        (("failing_rank", "label", "state"), f"{OPERATIONS} and failing_rank is not null"),
        (("failing_rank", "label", "state"), OPERATIONS),
        (("device_name", "platform", "group_path", "state"),
         "select count(distinct coalesce(device_id, operation_device_id)) "
         "from staging.stg_esper__operation_devices where operation_id = "
         + FIRST_FAILING.format(key="operation_id", mart="operation_rollout")),
    ],
    "data_tap": [
        (("query", "table"),
         "select count(*) from duckdb_tables() where schema_name = 'esper' "
         "and starts_with(table_name, 'data_tap__') "
         "and not contains(replace(table_name, 'data_tap__', ''), '__')"),
        (("column_name", "data_type"),
         "select count(*) from duckdb_columns() where schema_name = 'esper' "
         "and table_name = 'data_tap__device_stats_daily' and not starts_with(column_name, '_dlt')"),
        (("device_id", "report_date"), f"select count(*) from {TAP}"),
        # "Your own query" opens on the table's first 100 rows (its own `limit`)
        (("device_id", "report_date"), f"select count(*) from (from {TAP} limit 100)"),
    ],
}  # fmt: skip


def _count(warehouse: Path, sql: str) -> int:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchone()[0]


def drawn_items(view: View, counted_by: str) -> int:
    """The items a chart draws, as a reader counts them."""
    if counted_by == "bands":  # a label of the band axis with a bar drawn under it
        return len(stacks(view))
    if counted_by == "days":  # the places on the time axis a point, a line or an area reaches
        xs = sorted(
            (m.box[0] + m.box[2]) / 2 if m.kind == "point" else x
            for m in view.marks
            if m.kind != "bar"
            for x in ([0.0] if m.kind == "point" else [x for x, _ in m.points])
        )
        return sum(1 for n, x in enumerate(xs) if n == 0 or x - xs[n - 1] > 3)
    raise AssertionError(counted_by)


def _says_all_or_cut(what: str, title: str, shown: int, total: int) -> bool:
    """True when a list shows all its items, or says "N of M" with the N it shows."""
    if shown == total:
        return True
    cut = CUT.search(title)
    assert cut, f"{what} shows {shown} of the {total} items of its mart without saying so"
    said = tuple(int(g.replace(",", "")) for g in cut.groups())
    assert said == (shown, total), f"{what} says {cut.group(0)!r}, shows {shown} of {total}"
    return False


def _held(table: Shown) -> int:
    return len(table.rows) + table.closed


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_draws_every_item_of_its_mart_or_says_n_of_m(
    rendered, demo_warehouse, page
) -> None:
    drawings = charts(rendered.page(page).dom)
    tables = _tables(rendered.page(page).dom)
    known = CHARTS[page]
    titles = {v.title for d in drawings.values() for v in d.views if v.title}
    for title in titles:
        matches = [start for start in known if title.startswith(start)]
        assert len(matches) == 1, f"{page}: a chart this test does not know: {title!r}"
        listed = known[matches[0]]
        drawing = drawings[title]
        view = drawing.view(title)
        if listed.counted_by == "legend":
            (legend,) = drawing.legends
            shown = len(legend.labels)
        else:
            shown = drawn_items(view, listed.counted_by)
        total = _count(demo_warehouse, listed.mart_sql)
        assert shown > 0, f"{page}: {title!r} draws nothing"
        if not _says_all_or_cut(f"{page}: {title!r}", title, shown, total):
            # the others are one table away, and that table holds them
            assert listed.rest, f"{page}: {title!r} is cut and names no table holding the rest"
            assert any(tuple(t.columns[: len(listed.rest)]) == listed.rest for t in tables)
    assert {s for s in known if any(t.startswith(s) for t in titles)} == set(known), (
        f"{page}: a chart listed here is gone"
    )


@pytest.mark.parametrize("page", PAGES)
def test_every_table_holds_every_row_of_its_mart_or_says_n_of_m(
    rendered, demo_warehouse, page
) -> None:
    tables = _tables(rendered.page(page).dom)
    known = TABLES[page]
    assert [t.columns[: len(c)] for t, (c, _) in zip(tables, known, strict=False)] == [
        list(c) for c, _ in known
    ] and len(tables) == len(known), (
        f"{page}: its tables are not the ones listed here: {[t.columns[:4] for t in tables]}"
    )
    for table, (columns, sql) in zip(tables, known, strict=True):
        total = _count(demo_warehouse, sql)
        assert total > 0, f"{page}: the fixture's {columns} is empty"
        _says_all_or_cut(f"{page}: the table {columns}", table.says, _held(table), total)


def test_the_cut_rule_says_n_of_m_only_when_a_list_is_cut() -> None:
    from esper_warehouse.pipelines.readable import shown_of

    assert shown_of(26, 26) == "" and shown_of(30, 26) == ""
    assert shown_of(20, 26) == "20 of 26" and shown_of(30, 1_432) == "30 of 1,432"
