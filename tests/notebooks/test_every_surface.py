"""Every surface tells the same story: each headline number the demo's summary, `esper-warehouse
status`, the offline report (rendered in headless Chromium, network off) and the documents show
equals its row of `marts.headlines`, the numbers' one home (issue 33).

Each test reads what a person reads (the printed lines, the page's text, the warehouse guide's table
and queries) and finds every headline number there; a surface that counts on its own (another
denominator, another ranking, another reason grouping) prints another number and fails here.
"""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.build.model_files import SQL_DIR
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.jobs import demo
from esper_warehouse.pipelines.readable import duration
from esper_warehouse.pipelines.views import headlines, report, status
from esper_warehouse.pipelines.views.headlines import Headline, Headlines

from tests.conftest import copy_warehouse

from .browser import Opened, open_offline

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mart(demo_warehouse: Path) -> Headlines:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        numbers = headlines.read(con)
    assert numbers is not None and numbers.rows, "marts.headlines is missing or empty"
    return numbers


def _number(mart: Headlines, name: str) -> Headline:
    row = mart.number(name)
    assert row is not None, f"marts.headlines has no {name}"
    return row


def _n(value: int | None) -> str:
    return f"{value or 0:,}"


def _pct(row: Headline) -> str:
    return f"{row.share:.1%}" if row.share is not None else "n/a"


def _lines_found(text: str, wanted: list[str]) -> list[str]:
    """The wanted lines (regexes, whole lines) that `text` lacks."""
    return [w for w in wanted if not re.search(rf"^{w}$", text, re.M)]


def _morning_check(mart: Headlines) -> list[str]:
    """What `status` and the demo print from the morning check, as regexes over whole lines."""
    creds = _number(mart, "credentials_needing_action")
    by_status = ", ".join(
        f"{_n(r.value)} {r.item}" for r in mart.items("credentials_needing_action")
    )
    drift = _number(mart, "drift_disagreements")
    kinds = ", ".join(f"{_n(r.value)} {r.item}" for r in mart.items("drift_disagreements"))
    security = _number(mart, "security_disagreements")
    security_kinds = ", ".join(
        f"{_n(r.value)} {r.item}" for r in mart.items("security_disagreements")
    )
    slowest = _number(mart, "slowest_app_rollout")
    wipe = _number(mart, "users_may_wipe")
    any_ = _number(mart, "users_may_wipe_reboot_or_lock")
    unknown = _number(mart, "users_scopes_unknown")
    low, esper = _number(mart, "low_battery_devices"), _number(mart, "esper_low_battery_devices")
    waiting, stalled, failing = (
        _number(mart, f"pipeline_runs_{kind}") for kind in ("waiting", "stalled", "failing")
    )
    assert creds.value and drift.value and wipe.denominator, "the fixture shows every line"
    assert security.value and slowest.denominator, "the fixture shows every line"
    assert waiting.denominator, "the fixture has Esper Pipelines runs not ended"
    held = {
        "waiting": [f"{r.label} (for {duration(r.value)})"
                    for r in mart.items("pipeline_runs_waiting")],
        "stalled": [f"{r.label} (no change for {duration(r.value)})"
                    for r in mart.items("pipeline_runs_stalled")],
        "failing": [f"{r.label}: {_n(r.value)} of {_n(r.denominator)} devices failed or timed out"
                    for r in mart.items("pipeline_runs_failing")],
    }  # fmt: skip
    # each run counted is named once under its count, and the fixture has one of each
    assert [len(runs) for runs in held.values()] == [waiting.value, stalled.value, failing.value]
    assert waiting.value and stalled.value and failing.value
    pipelines = [re.escape(f"Esper Pipelines runs not ended (marts.pipeline_rollout): "
                           f"{_n(waiting.denominator)}")]  # fmt: skip
    for kind, count in zip(held, (waiting, stalled, failing), strict=True):
        pipelines.append(re.escape(f"  {count.label}: {_n(count.value)}"))
        pipelines += [re.escape(f"    {run}") for run in held[kind]]
    return [
        re.escape(f"credentials expired or expiring (marts.credential_expiry): {_n(creds.value)} "
                  f"({by_status})"),
        re.escape(f"devices whose drift verdicts differ (marts.drift_disagreements): "
                  f"{_n(drift.value)} ({kinds})"),
        re.escape(f"devices whose security verdicts differ (marts.security_disagreements): "
                  f"{_n(security.value)} ({security_kinds})"),
        re.escape(f"active users who may wipe devices (marts.fleet_access): {_n(wipe.value)} of "
                  f"{_n(wipe.denominator)}; wipe, reboot or lock: {_n(any_.value)}")
        + (re.escape(f"; scopes unknown for {_n(unknown.value)}") if unknown.value else ""),
        re.escape(f"{low.label}: {_n(low.value)} of {_n(low.denominator)} (marts.headlines; "
                  f"Esper's console counter: {_n(esper.value)})"),
        *pipelines,
        re.escape(f"{slowest.label}: {_n(slowest.value)} of {_n(slowest.denominator)} "
                  f"(marts.headlines)"),
    ]  # fmt: skip


def test_the_demo_summary_prints_the_marts_numbers(
    demo_warehouse: Path, mart: Headlines, capsys: pytest.CaptureFixture[str]
) -> None:
    demo._summary(demo_warehouse)
    out = capsys.readouterr().out
    rate = _number(mart, "compliance_rate")
    wanted = [
        rf"Fleet summary as of .* UTC \(API time\): {_n(_number(mart, 'devices').value)} devices",
        *[rf"  {r.item}\s+{_n(r.value)}" for r in mart.items("devices")],
        rf"Compliance \(marts.headlines\), of the {_n(rate.denominator)} devices in service:",
        rf"  compliant\s+{_n(rate.value)}\s+{re.escape(_pct(rate))}",
    ]
    for name, word in (("non_compliant_devices", "non_compliant"),
                       ("unverified_devices", "unverified")):  # fmt: skip
        row = _number(mart, name)
        wanted.append(rf"  {word}\s+{_n(row.value)}\s+{re.escape(_pct(row))}")
    out_of = _number(mart, "out_of_service_devices")
    wanted.append(
        rf"  out_of_service\s+{_n(out_of.value)}\s+\({re.escape(_pct(out_of))} of all devices.*"
    )
    reasons = mart.items("top_reasons")
    top = reasons[:3]
    assert len(reasons) > len(top) == 3, "the fixture has more than three reasons"
    # a list cut to three says so (readable.shown_of: issue 41)
    wanted.append(
        rf"  top reasons \(3 of {len(reasons)}: all in marts.headlines\) among the "
        rf"{_n(top[0].denominator)} non-compliant devices:"
    )
    wanted += [re.escape(f"    {r.label} ({r.item}): {_n(r.value)} devices") for r in top]
    worst = mart.items("worst_command_rollouts")
    assert len(worst) == 3, "the fixture has three requests to 5 devices or more"
    wanted += [
        rf"  {r.label}\s+\S+\s+{_n(r.denominator)} devices  success\s+\S+  "
        rf"failed/timed out\s+{re.escape(_pct(r))}  p90 .*"
        for r in worst
    ]
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        (ranked,) = con.execute("select count(failing_rank) from marts.command_rollout").fetchone()
    assert ranked > len(worst), "the fixture ranks more requests than the three listed"
    wanted.append(
        re.escape(f"The worst command rollouts (3 of {ranked:,} ranked; all in "
                  "marts.command_rollout.failing_rank) (marts.headlines: requests to ")
        + r"\d+ devices or more, by failure \+ timeout rate\):"
    )  # fmt: skip
    unseen = _number(mart, "not_seen_devices")
    wanted.append(re.escape(f"{unseen.label} (marts.stale_devices): {_n(unseen.value)}"))
    wanted += [rf"  {r.item}\s+{_n(r.value)}" for r in mart.items("not_seen_devices")]
    wanted += _morning_check(mart)
    assert _lines_found(out, wanted) == [], out
    # the worst rollouts in the mart's order, nothing else ranked
    printed = re.findall(r"^  (\w+)\s+\d{4}-\d\d-\d\d\s+([\d,]+) devices", out, re.M)
    assert printed == [(r.label, _n(r.denominator)) for r in worst]


def test_status_prints_the_marts_numbers(demo_warehouse: Path, mart: Headlines) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        out = status.render(con, "esper")
    rate, unseen = _number(mart, "compliance_rate"), _number(mart, "not_seen_devices")
    wanted = [
        re.escape(
            f"compliant devices (marts.headlines): {_n(rate.value)} of {_n(rate.denominator)} in "
            f"service ({_pct(rate)})"
        ),
        re.escape(
            f"{unseen.label}: {_n(unseen.value)} of {_n(unseen.denominator)} (marts.headlines)"
        ),
        *_morning_check(mart),
    ]
    assert _lines_found(out, wanted) == [], out


def _page_text(page: Path) -> tuple[str, str]:
    """The rendered page's DOM and its visible text (tags dropped, entities decoded, spaces
    collapsed), as Chromium shows it with the network off."""
    return _shown(open_offline(page))


def _shown(opened: Opened) -> tuple[str, str]:
    """`_page_text` of a page Chromium has rendered already (the report's: `rendered`)."""
    assert opened.requests == []
    text = html.unescape(re.sub(r"<[^>]+>", " ", opened.dom))
    return opened.dom, re.sub(r"\s+", " ", text)


def _stat(text: str, label: str) -> tuple[str, str]:
    """The value and the caption of the stat tile labelled `label` (the first on the page: the
    tiles open it), as shown: label, value, caption."""
    match = re.search(rf"(?:^| ){re.escape(label)} ([\d,]+) ([^A-Z]*)", text)
    assert match, f"no stat tile {label!r}"
    return match.group(1), match.group(2).strip()


def test_the_offline_report_shows_the_marts_numbers(rendered, mart: Headlines) -> None:
    _, text = _shown(rendered.page("fleet_overview"))
    rate = _number(mart, "compliance_rate")
    non = _number(mart, "non_compliant_devices")
    low = _number(mart, "low_battery_devices")
    unseen = _number(mart, "not_seen_devices")

    def parts(row: Headline) -> tuple[str, str]:
        # what a tile counts and what it is out of, in the mart's words (its label)
        found = re.fullmatch(r"(.*?) \((?:of )?(.*)\)", row.label)
        return (found.group(1), found.group(2)) if found else (row.label, "")

    unverified = _number(mart, "unverified_devices")
    tiles = {
        "Devices": (_n(_number(mart, "devices").value), "whole fleet"),
        parts(rate)[0]:
            (_n(rate.value), f"{_pct(rate)} of {_n(rate.denominator)} {parts(rate)[1]}"),
        parts(non)[0]: (_n(non.value), f"{_pct(non)} of {_n(non.denominator)} {parts(non)[1]}"),
        parts(unverified)[0]: (_n(unverified.value), None),
        parts(unseen)[0]: (_n(unseen.value), None),
        parts(low)[0]: (_n(low.value), f"{_pct(low)} of {_n(low.denominator)} {parts(low)[1]}"),
    }  # fmt: skip
    assert parts(rate) == ("Compliant", "devices in service")
    for label, (value, caption) in tiles.items():
        shown, shown_caption = _stat(text, label)
        assert shown == value, (label, shown, value)
        if caption is not None:
            assert shown_caption.startswith(caption), (label, shown_caption, caption)
    drift = _number(mart, "drift_disagreements")
    kinds = ", ".join(f"{_n(r.value)} {r.item}" for r in mart.items("drift_disagreements"))
    wipe = _number(mart, "users_may_wipe")
    sentences = [
        f"{unseen.label}: {_n(unseen.value)} devices",
        f"Non-compliant devices ({_n(non.value)})",
        f"{_n(drift.value)} devices where the two verdicts differ ({kinds})",
        f"{_n(_number(mart, 'credentials_needing_action').value)} credentials have expired",
        f"{_n(wipe.value)} of {_n(wipe.denominator)} active users may wipe devices",
    ]
    assert [s for s in sentences if s not in text] == [], text


def test_the_reports_pipelines_section_shows_the_marts_numbers(rendered, mart: Headlines) -> None:
    """The rollouts page's three Pipelines tiles: each its headline's value, out of the runs not
    ended; the fixture holds a run of each kind, so no tile can pass by showing 0."""
    _, text = _shown(rendered.page("rollouts"))
    for kind in ("waiting", "stalled", "failing"):
        row = _number(mart, f"pipeline_runs_{kind}")
        assert row.value and row.denominator, f"the fixture has no {kind} pipeline run"
        shown, caption = _stat(text, row.label.removesuffix(" (of runs not ended)"))
        assert shown == _n(row.value), (kind, shown, row.value)
        assert caption.startswith(f"of {_n(row.denominator)} runs not ended"), (kind, caption)


def test_the_reports_most_failing_table_starts_with_the_marts_worst(
    rendered, mart: Headlines
) -> None:
    dom, _ = _shown(rendered.page("rollouts"))
    table = dom[dom.index("Most failing command requests") :]
    rows = re.findall(r"<tr>(.*?)</tr>", table[: table.index("</table>")], re.S)
    ids = [
        found.group(1)
        for row in rows
        if (found := re.search(r"<td[^>]*>([0-9a-f-]{36})</td>", row))
    ]
    assert ids[:3] == [r.item for r in mart.items("worst_command_rollouts")]


def _readme() -> str:
    """The documents (README and the pages under docs/): the queries and the headline table."""
    from tests.docs import every_page

    return every_page()


def _readme_query(comment: str) -> str:
    match = re.search(rf"-- {re.escape(comment)}.*?\n(select .*?);", _readme(), re.S)
    assert match, f"no page has a {comment!r} query"
    return match.group(1)


def test_the_readme_gives_each_headline_the_marts_definition(demo_warehouse: Path) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        defined = dict(
            con.execute(
                "select headline, arg_min(definition, coalesce(item_rank, 0)) "
                "from marts.headlines group by headline"
            ).fetchall()
        )
    block = re.search(r"<!-- headlines:.*?-->\n(.*?)<!-- /headlines -->", _readme(), re.S)
    assert block, "no page has the headline table"
    documented = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", block.group(1), re.M))
    assert documented == defined


def test_the_readme_queries_rank_as_the_mart(demo_warehouse: Path, mart: Headlines) -> None:
    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        worst = con.execute(_readme_query("Worst command rollouts")).fetchall()
        reasons = con.execute(_readme_query("Why are devices non-compliant?")).fetchall()
        listed = con.execute(_readme_query("The headline numbers")).fetchall()
    assert [(row[1], row[3]) for row in worst[:3]] == [
        (r.label, r.denominator) for r in mart.items("worst_command_rollouts")
    ]
    assert [(row[0], row[2]) for row in reasons] == [
        (r.item, r.value) for r in mart.items("top_reasons")
    ]
    assert len(listed) == len(mart.rows)


def test_low_battery_and_esper_s_counter_agree_on_the_simulator(mart: Headlines) -> None:
    """The simulator's counter counts what the headline counts (below 15 %, devices served, tvOS
    without a battery), read in the same run: a difference is a bug in one of them. On a live
    tenant they may differ (docs/guide/warehouse.md, "Headline numbers")."""
    low, esper = _number(mart, "low_battery_devices"), _number(mart, "esper_low_battery_devices")
    assert low.value > 0 and low.value == esper.value


# Each threshold's home and a value unlike the shipped one (a macro, or the admin's seed).
EDITED_THRESHOLDS = {
    "macros/macros.sql": [
        ("low_battery_below_pct() as 15", "low_battery_below_pct() as 50"),
        ("pipeline_stalled_after_hours() as 24", "pipeline_stalled_after_hours() as 1"),
        ("pipeline_failing_share() as 0.10", "pipeline_failing_share() as 0.5"),
        ("rollout_ranked_from_devices() as 5", "rollout_ranked_from_devices() as 30"),
    ],
    "seeds/last_seen_buckets.csv": [("active,24,true", "active,48,true")],
}


def _edited_sql(folder: Path) -> Path:
    """A copy of `sql/` in `folder` with every threshold edited in its home (`EDITED_THRESHOLDS`)."""
    sql = folder / "sql"
    shutil.copytree(SQL_DIR, sql)
    for name, edits in EDITED_THRESHOLDS.items():
        text = (sql / name).read_text()
        for old, new in edits:
            assert old in text, f"{name} no longer says {old!r}"
            text = text.replace(old, new)
        (sql / name).write_text(text)
    return sql


@pytest.fixture(scope="module")
def edited(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo warehouse rebuilt from a copy of `sql/` with every threshold edited in its home
    (`_edited_sql`)."""
    folder = tmp_path_factory.mktemp("edited")
    sql = _edited_sql(folder)
    wh = folder / demo_warehouse.name
    copy_warehouse(demo_warehouse, wh)
    build_models(wh, sql_dir=sql, seeds=sql / "seeds")
    return wh


def _edited_headlines(wh: Path) -> Headlines:
    with duckdb.connect(str(wh), read_only=True) as con:
        numbers = headlines.read(con)
    assert numbers is not None
    return numbers


def test_a_threshold_edited_in_its_home_moves_its_count_and_status_says_it(
    edited: Path, mart: Headlines
) -> None:
    """The thresholds are written once (sql/macros/macros.sql; the last-seen boundary in the
    admin's last_seen_buckets.csv). Edited there, each count follows the new threshold and
    `status` prints the new numbers, none of the old: no surface spells a threshold itself."""
    with duckdb.connect(str(edited), read_only=True) as con:
        out = status.render(con, "esper")
        # each count worked out again from the marts' columns with the edited thresholds
        low, reporting, unseen = con.execute(
            "select count(*) filter (where d.battery_level_pct < 50), count(d.battery_level_pct), "
            "count(*) filter (where c.last_seen_at is null "
            "    or epoch(c.as_of - c.last_seen_at) / 3600 > 48) "
            "from marts.fleet_compliance as c "
            "join staging.stg_esper__devices as d using (device_id)"
        ).fetchone()
        stalled, failing = con.execute(
            "select count(distinct pipeline_run_id) filter (where run_status <> 'waiting' "
            "    and run_updated_at < as_of - interval 1 hour), "
            "count(distinct pipeline_run_id) filter (where stage_order = last_reached "
            "    and failed_devices + timed_out_devices > 0.5 * target_devices) "
            "from (select *, max(stage_order) filter (where stage_run_id is not null) "
            "    over (partition by pipeline_run_id) as last_reached "
            "    from marts.pipeline_rollout where is_run_open) "
            "cross join intermediate.int_as_of"
        ).fetchone()
    numbers = _edited_headlines(edited)
    shown = {
        name: (row.label, row.value)
        for name in ("low_battery_devices", "not_seen_devices", "pipeline_runs_stalled",
                     "pipeline_runs_failing")
        if (row := numbers.number(name)) is not None
    }  # fmt: skip
    assert shown == {
        "low_battery_devices": ("Battery below 50 % (of devices reporting a battery)", low),
        "not_seen_devices": ("Not seen for more than 48 h (or never)", unseen),
        "pipeline_runs_stalled": ("Pipeline runs stalled for more than 1 h (of runs not ended)",
                                  stalled),
        "pipeline_runs_failing": ("Pipeline runs failing on more than 50 % of a stage (of runs "
                                  "not ended)", failing),
    }  # fmt: skip
    assert low != _number(mart, "low_battery_devices").value, "the edit moved the count"
    assert reporting == _number(mart, "low_battery_devices").denominator
    for label, value in shown.values():
        assert f"{label}: {value:,}" in out, out
    assert not re.search(r"\b(15|24|10) ?(%|h\b|hours)", out), out


def test_the_fleet_page_words_the_edited_thresholds(pages: EditedAgedPages) -> None:
    """The tiles and the last-seen boundaries of the fleet page, from the same homes."""
    unseen = _number(_edited_headlines(pages.warehouse), "not_seen_devices")
    text = pages.fleet
    for wanted in ("Battery below 50 %", "Not seen for more than 48 h",
                   f"active ≤ {duration(48 * 60)}", f"stale ≤ {duration(168 * 60)}",
                   f"not seen for more than {duration(168 * 60)}, or a value unknown",
                   f"{unseen.label}: {unseen.value:,} devices"):  # fmt: skip
        assert wanted in text, wanted
    assert "active ≤ 24.0 h" not in text and "a day or more" not in text


def test_the_demo_and_the_rollouts_page_rank_from_the_edited_threshold(
    edited: Path, pages: EditedAgedPages, mart: Headlines, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rollouts ranked from 30 target devices: the mart's worst, the demo's sentence and the
    rollouts page's tables say so, and the page's Pipelines tiles carry their edited labels."""
    worst = _edited_headlines(edited).items("worst_command_rollouts")
    assert worst and all(r.denominator >= 30 for r in worst)
    assert worst != mart.items("worst_command_rollouts"), "the edit moved the ranking"
    demo._summary(edited)
    printed = capsys.readouterr().out
    assert (
        "(marts.headlines: requests to 30 devices or more, by failure + timeout rate):" in printed
    )
    text = pages.rollouts
    for wanted in ("Most failing command requests to 30 devices or more",
                   "Most failing operations to 30 devices or more",
                   "Pipeline runs stalled for more than 1 h",
                   "Pipeline runs failing on more than 50 % of a stage"):  # fmt: skip
        assert wanted in text, wanted


# -- Every number knows its age (issue 41) ------------------------------------------------------

PIPELINES_ROUTE = "GET /pipelines/v0/runs/"
CREDENTIALS_ROUTE = "GET /tenant/v0/apnscertificates/"


@pytest.fixture(scope="module")
def aged(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo warehouse, as if its key had never had the credentials' scope (every run refused
    the Apple push certificates: the family is unknown) and a nightly 72 h after the last one was
    refused Esper Pipelines (the family is 3 days old, more than the warning age)."""
    wh = tmp_path_factory.mktemp("aged") / demo_warehouse.name
    copy_warehouse(demo_warehouse, wh)
    _age(wh)
    build_models(wh)
    return wh


def _age(wh: Path) -> None:
    """`aged`'s edits of the runs' records (and the empty credentials table), models not built."""
    import orjson

    refused = {
        "treatment": "skipped",
        "route": CREDENTIALS_ROUTE,
        "status": 403,
        "read_from": None,
        "why": f"skipped: {CREDENTIALS_ROUTE} answered 403 (refused for this route)",
    }
    with duckdb.connect(str(wh)) as con:
        runs = con.execute("select run_id, tables from esper._esper_runs").fetchall()
        for run_id, tables in runs:
            treated = orjson.loads(tables)
            assert "apns_certificates" in treated, "the demo's runs record their tables"
            treated["apns_certificates"] = refused
            con.execute(
                "update esper._esper_runs set tables = ? where run_id = ?",
                [orjson.dumps(treated).decode(), run_id],
            )
        con.execute("delete from esper.apns_certificates")  # never loaded: nothing in it
        (last,) = con.execute(
            "select run_id from esper._esper_runs where status in ('ok', 'partial') "
            "order by as_of desc limit 1"
        ).fetchone()
        con.execute(
            "create temp table night as select * from esper._esper_runs where run_id = ?", [last]
        )
        treated = orjson.loads(con.execute("select tables from night").fetchone()[0])
        for table in treated:
            if table.startswith("pipeline"):
                treated[table] = {**refused, "route": PIPELINES_ROUTE}
        con.execute(
            "update night set run_id = 'aged-night', status = 'partial', mode = 'incremental', "
            "as_of = as_of + interval 72 hour, started_at = started_at + interval 72 hour, "
            "finished_at = finished_at + interval 72 hour, tables = ?",
            [orjson.dumps(treated).decode()],
        )
        con.execute("insert into esper._esper_runs select * from night")


@dataclass(frozen=True)
class EditedAgedPages:
    """The fleet and rollouts pages of one warehouse, as Chromium shows them (visible text)."""

    warehouse: Path
    fleet: str
    rollouts: str


@pytest.fixture(scope="module")
def pages(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> EditedAgedPages:
    """The fleet and rollouts pages of the demo warehouse both aged (`_age`) and rebuilt from the
    edited thresholds (`_edited_sql`), each exported and rendered once for the page tests of both
    stories (a page costs ~5-10 CPU-s). The stories touch different words of a page (thresholds:
    labels and boundaries; ages: notes and the freshness block), and each test works out what it
    expects from this warehouse's marts; the marts' and `status`'s tests keep a warehouse each."""
    folder = tmp_path_factory.mktemp("edited_aged")
    sql = _edited_sql(folder)
    wh = folder / demo_warehouse.name
    copy_warehouse(demo_warehouse, wh)
    _age(wh)
    build_models(wh, sql_dir=sql, seeds=sql / "seeds")
    shown = {}
    for name in ("fleet_overview", "rollouts"):
        page = report.export_notebook(report.NOTEBOOKS_DIR / f"{name}.py", folder, wh)
        assert page.ok, page.errors
        shown[name] = _page_text(page.html)[1]
    return EditedAgedPages(wh, shown["fleet_overview"], shown["rollouts"])


def _aged_headlines(wh: Path) -> Headlines:
    with duckdb.connect(str(wh), read_only=True) as con:
        numbers = headlines.read(con)
    assert numbers is not None
    return numbers


def test_the_aged_marts_keep_the_pipelines_numbers_and_say_credentials_are_unknown(
    aged: Path, mart: Headlines
) -> None:
    numbers = _aged_headlines(aged)
    for kind in ("waiting", "stalled", "failing"):
        old, new = mart.number(f"pipeline_runs_{kind}"), numbers.number(f"pipeline_runs_{kind}")
        assert (new.value, new.denominator) == (old.value, old.denominator)
        assert [(r.item, r.value) for r in numbers.items(new.headline)] == [
            (r.item, r.value) for r in mart.items(old.headline)
        ]
        assert new.age_note.startswith("Pipelines: as of ")
        assert f"(3 days old: {PIPELINES_ROUTE} refused (403) since " in new.age_note
    creds = numbers.number("credentials_needing_action")
    assert creds.value is None and creds.denominator is None and not creds.is_known
    assert creds.age_note.startswith(
        f"Credentials: unknown (never loaded: {CREDENTIALS_ROUTE} refused (403)"
    )
    assert not numbers.items("credentials_needing_action")
    rate = numbers.number("compliance_rate")
    assert rate.is_known and rate.age_note is None


def test_status_and_the_demo_print_each_numbers_age_from_the_mart(
    aged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    numbers = _aged_headlines(aged)
    waiting = numbers.number("pipeline_runs_waiting")
    creds = numbers.number("credentials_needing_action")
    assert status.status(aged) == 7  # Pipelines held back for more than two nights
    out = capsys.readouterr()
    demo._summary(aged)
    summary = capsys.readouterr().out
    for text in (out.out, summary):
        assert (
            "Esper Pipelines runs not ended (marts.pipeline_rollout): "
            f"{waiting.denominator:,} [{waiting.age_note}]"
        ) in text
        assert (
            f"credentials expired or expiring (marts.credential_expiry): {creds.age_note}" in text
        )
        assert f"{creds.value or 0:,} (" not in text.split("credential_expiry)")[1][:5]
    assert "warning: Pipelines held back: as of " in out.err
    block = out.out.split("freshness (")[1].split("\n\n")[0]
    assert f"Credentials{' ' * 3}" not in block or "unknown (never loaded: " in block
    assert "HELD BACK: as of " in block and f"{PIPELINES_ROUTE} refused (403)" in block


def test_the_report_prints_each_numbers_age_and_the_freshness_block(
    pages: EditedAgedPages,
) -> None:
    """The fleet page opens with every table family's freshness; its sections and the rollouts
    page's Pipelines tiles print the mart's words: the age of a number older than the run, and
    "unknown" with its reason for one never loaded (never 0)."""
    numbers = _aged_headlines(pages.warehouse)
    waiting = numbers.number("pipeline_runs_waiting")
    creds = numbers.number("credentials_needing_action")
    text = pages.fleet
    with duckdb.connect(str(pages.warehouse), read_only=True) as con:
        behind, families = con.execute(
            "select count(age_note), count(*) from intermediate.int_family_freshness"
        ).fetchone()
    assert behind >= 2  # Pipelines, Credentials (and the census, read by full scans only)
    assert f"Freshness : {behind} of {families} table families" in text
    assert "held back: Pipelines" not in text and "held back: as of " in text
    assert creds.age_note in text
    assert f"{creds.value or 0:,} credentials have expired" not in text
    text = pages.rollouts
    assert waiting.age_note in text
    assert f"of {waiting.denominator:,} runs not ended · {waiting.age_note}" in text


# What changed overnight (issue 52): the last night's digest, counted once (pipelines/views/digest.py
# over marts.fleet_changes), told alike by `status`, `changes --json`, the report's index (its
# first page) and the fleet page, in the vocabulary's words and order.


def _vocabulary() -> dict[str, tuple[int, str]]:
    """change -> (position, label), as sql/vocabulary/change_kinds.csv writes them."""
    with open(ROOT / "sql" / "vocabulary" / "change_kinds.csv") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["change"]: (int(r["position"]), r["label"]) for r in rows}


def _last_nights_changes(wh: Path) -> tuple[str, dict[str, list[str]]]:
    """The heading `status` prints and, per change of the last night compared (vocabulary
    order), its subjects' names sorted: worked out from the mart and the vocabulary file."""
    with duckdb.connect(str(wh), read_only=True) as con:
        since, as_of = con.execute(
            "select since, as_of from changes.comparisons order by as_of desc limit 1"
        ).fetchone()  # type: ignore[misc]
        found = con.execute(
            "select change, coalesce(subject_name, subject_id), subject_id "
            "from marts.fleet_changes where as_of = ? and change <> 'not_compared'",
            [as_of],
        ).fetchall()
    words = _vocabulary()
    names: dict[str, list[str]] = {}
    for change, name, _subject in sorted(found, key=lambda r: (words[r[0]][0], r[1], r[2])):
        names.setdefault(change, []).append(name)
    heading = (
        f"Since {since:%Y-%m-%d %H:%M} UTC (as of {as_of:%Y-%m-%d %H:%M} UTC): "
        f"{len(found):,} changes"
    )
    return heading, names


def _digest_lines(heading: str, names: dict[str, list[str]]) -> list[str]:
    """The lines every short surface shows: the heading, then per change its count and its
    first three subjects, "3 of N" when it has more."""
    words = _vocabulary()
    out = [heading]
    for change, subjects in names.items():
        cut = f"; 3 of {len(subjects):,}" if len(subjects) > 3 else ""
        out.append(f"{words[change][1]}: {len(subjects):,} ({', '.join(subjects[:3])}{cut})")
    return out


def _digest_on_page(opened: Opened) -> list[str]:
    """The "What changed since" block of a rendered page: its heading line and its items."""
    assert opened.requests == []
    block = re.search(r'<section class="digest">(.*?)</section>', opened.dom, re.S)
    assert block, "no 'What changed since' block on the page"
    parts = re.findall(r"<(?:p|li)[^>]*>(.*?)</(?:p|li)>", block.group(1), re.S)
    return [re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", p))).strip() for p in parts]


def test_what_changed_overnight_is_told_alike_everywhere(
    demo_warehouse: Path, rendered, capsys: pytest.CaptureFixture[str]
) -> None:
    heading, names = _last_nights_changes(demo_warehouse)
    # the demo's last two nights differ (a Pipeline run moves, an app gets a version): a digest
    # of nothing would hold nothing equal
    assert names, "the demo warehouse recorded no change between its last two nights"
    wanted = _digest_lines(heading, names)

    with duckdb.connect(str(demo_warehouse), read_only=True) as con:
        printed = status.render(con, "esper").splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("Since "))
    assert [line.strip() for line in printed[start : start + len(wanted)]] == wanted
    assert not printed[start + len(wanted)].startswith("  "), "status lists more changes"

    assert cli.main(["changes", "--warehouse", str(demo_warehouse), "--json"]) == 0
    told = json.loads(capsys.readouterr().out)
    assert told["counts"] == {change: len(found) for change, found in names.items()}
    assert list(told["counts"]) == list(names)  # the vocabulary's order
    assert told["labels"] == {change: _vocabulary()[change][1] for change in names}
    assert told["first_subjects"] == names  # `changes` names every subject
    assert told["total"] == sum(map(len, names.values()))

    # the report opens on its index: the block is at its top, before the pages' list
    index = rendered.page("index")
    assert index.dom.index('class="digest"') < index.dom.index('href="fleet_overview.html"')
    assert _digest_on_page(index) == wanted
    fleet = rendered.page("fleet_overview")
    assert _digest_on_page(fleet) == wanted
    # the notebook's night-by-night table counts the same night (the last 7 nights: one here)
    _, text = _shown(fleet)
    total = sum(map(len, names.values()))
    assert f"{total:,} changes over the 1 night compared" in text
