"""Each chart of the report, as headless Chromium renders the offline page, draws the marts'
numbers: read from the marks' geometry against the axes' scales (`drawn.py`), to a pixel, not
from the data the chart was given. A stack is the total of its parts (no bar hides another),
every legend sits by the chart whose colours it explains, and no axis label is cut off."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.readable import duration
from esper_warehouse.pipelines.views import report

from .drawn import Drawing, View, area_stacks, charts, drawn_total, overlap, stacks

PAGES = [nb.stem for nb in report.notebooks()]


def _mart(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def _drawings(rendered, page: str) -> list[Drawing]:
    return list({id(d): d for d in charts(rendered.page(page).dom).values()}.values())


def _view(rendered, page: str, title: str) -> View:
    return charts(rendered.page(page).dom)[title].view(title)


def _view_titled(rendered, page: str, start: str) -> View:
    """The one chart whose title starts with `start` (a cut list's title goes on "(N of M; ...)")."""
    (title,) = [t for t in charts(rendered.page(page).dom) if t.startswith(start)]
    return _view(rendered, page, title)


def _distance(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Gap between two boxes (x0, y0, x1, y1): 0 when they touch or overlap."""
    dx = max(a[0] - b[2], b[0] - a[2], 0)
    dy = max(a[1] - b[3], b[1] - a[3], 0)
    return (dx * dx + dy * dy) ** 0.5


@pytest.mark.parametrize("page", PAGES)
def test_every_legend_sits_by_the_chart_that_draws_its_colours(rendered, page) -> None:
    for drawing in _drawings(rendered, page):
        for legend in drawing.legends:
            nearest = min(drawing.views, key=lambda v: _distance(legend.box, v.box))
            drawn = set().union(*(m.colours for m in nearest.marks))
            assert set(legend.colours.values()) <= drawn, (
                f"{page}: the legend {legend.description!r} sits by {nearest.title!r}, "
                "which does not draw its colours"
            )


@pytest.mark.parametrize("page", PAGES)
def test_no_bar_hides_another_and_no_label_is_cut(rendered, page) -> None:
    for drawing in _drawings(rendered, page):
        for view in drawing.views:
            for axis in view.axes:
                cut = [text for _, _, text in axis.labels if text.endswith("…")]
                assert not cut, f"{page}: {view.title!r} cuts its labels {cut[:3]}"
            if not view.bars():
                continue
            tolerance = next(a for a in view.axes if a.is_linear).per_pixel
            for category, segments in stacks(view).items():
                assert overlap(segments) <= tolerance * len(segments), (
                    f"{page}: {view.title!r} draws bars over one another at {category!r}"
                )


def test_devices_by_last_check_in_draws_every_device_of_each_bucket(
    rendered, demo_warehouse
) -> None:
    view = _view(rendered, "fleet_overview", "Devices by last check-in")
    expected = dict(
        _mart(
            demo_warehouse,
            "select last_seen_bucket, count(*) from marts.fleet_compliance group by all",
        )
    )
    drawn = {bucket: drawn_total(s) for bucket, s in stacks(view).items()}
    assert drawn.keys() == expected.keys()
    pixel = view.axis("y").per_pixel
    for bucket, devices in expected.items():
        assert abs(drawn[bucket] - devices) <= pixel, f"{bucket}: drawn {drawn[bucket]:.0f}"


def test_devices_by_platform_draws_one_bar_per_platform(rendered, demo_warehouse) -> None:
    view = _view(rendered, "fleet_overview", "Devices by platform")
    expected = dict(
        _mart(demo_warehouse, "select platform, count(*) from marts.fleet_compliance group by all")
    )
    drawn = stacks(view)
    assert {p: len(s) for p, s in drawn.items()} == {p: 1 for p in expected}
    for platform, devices in expected.items():
        assert abs(drawn_total(drawn[platform]) - devices) <= view.axis("x").per_pixel


def test_devices_by_verdict_stacks_every_device_of_each_day(rendered, demo_warehouse) -> None:
    view = _view(rendered, "fleet_overview", "Devices by verdict")
    expected = [
        devices
        for (devices,) in _mart(
            demo_warehouse,
            "select sum(devices + out_of_service_devices) from marts.fleet_compliance_daily "
            "group by day order by day",
        )
    ]
    days = area_stacks(view)
    assert len(days) == len(expected)
    pixel = view.axis("y").per_pixel
    for segments, devices in zip(days, expected, strict=True):
        assert overlap(segments) <= pixel * len(segments)
        assert abs(drawn_total(segments) - devices) <= pixel


def test_verdict_by_platform_divides_by_the_headline_s_devices_in_service(
    rendered, demo_warehouse
) -> None:
    """Each bar is its platform's devices in service, as the compliance headline's denominator:
    the compliant shares drawn, times each platform's devices in service, add up to the
    headline's count of the headline's devices, and the axis names them in the headline's words
    (an out-of-service device in a bar, "Android 463 of 1,432", fails both)."""
    drawing = charts(rendered.page("fleet_overview").dom)["Verdict by platform"]
    view = drawing.view("Verdict by platform")
    (legend,) = drawing.legends
    ((value, denominator, label),) = _mart(
        demo_warehouse,
        "select value, denominator, label from marts.headlines "
        "where headline = 'compliance_rate' and item is null",
    )
    counts: dict[str, dict[str, int]] = {}
    for platform, verdict, devices in _mart(
        demo_warehouse,
        "select platform, verdict, count(*) from marts.fleet_compliance where is_in_service "
        "group by all",
    ):
        counts.setdefault(platform, {})[verdict] = devices
    assert sum(sum(v.values()) for v in counts.values()) == denominator
    (words,) = re.findall(r"\(of (.+)\)$", label)  # "devices in service"
    assert words in view.axis("x").title, (view.axis("x").title, words)
    verdict_of = {colour: verdict for verdict, colour in legend.colours.items()}
    x, pixel = view.axis("x"), view.axis("x").per_pixel
    compliant = 0.0
    for bar in view.bars():
        x0, y0, x1, y1 = bar.box
        platform = view.axis("y").category(y0, y1)
        share = x.value(x1) - x.value(x0)
        verdicts = counts[platform]
        expected = verdicts.get(verdict_of[bar.fill], 0) / sum(verdicts.values())
        assert abs(share - expected) <= pixel, (platform, verdict_of[bar.fill], share, expected)
        if verdict_of[bar.fill] == "compliant":
            compliant += share * sum(verdicts.values())
    assert abs(compliant - value) <= pixel * denominator, (compliant, value)


@pytest.mark.parametrize(
    ("title", "mart", "key"),
    [
        ("Command outcomes per request", "command_rollout", "command_request_id"),
        ("Operation outcomes", "operation_rollout", "operation_id"),
    ],
)
def test_rollout_outcomes_draw_each_outcome_s_share_of_the_targets(
    rendered, demo_warehouse, title, mart, key
) -> None:
    view = _view_titled(rendered, "rollouts", title)
    drawing = charts(rendered.page("rollouts").dom)[view.title]
    (legend,) = drawing.legends
    outcomes = list(legend.colours)
    rows = _mart(
        demo_warehouse,
        f"select left({key}, 8), target_devices, "
        + ", ".join(f"{o}_devices" for o in outcomes)
        + f" from marts.{mart} where target_devices > 0",
    )
    shares = {
        row[0]: {o: n / row[1] for o, n in zip(outcomes, row[2:], strict=True)} for row in rows
    }
    outcome_of = {colour: outcome for outcome, colour in legend.colours.items()}
    x, pixel = view.axis("x"), view.axis("x").per_pixel
    for label, segments in stacks(view).items():
        assert abs(drawn_total(segments) - 1) <= pixel * len(segments), label
    for bar in view.bars():
        x0, y0, x1, y1 = bar.box
        label = view.axis("y").category(y0, y1)
        expected = shares[label.rsplit(" · ", 1)[1]][outcome_of[bar.fill]]
        assert abs(x.value(x1) - x.value(x0) - expected) <= pixel, (label, outcome_of[bar.fill])


def test_apps_now_draws_each_app_s_share_on_its_latest_version(rendered, demo_warehouse) -> None:
    view = _view_titled(rendered, "rollouts", "Apps now: share of reporting devices")
    expected = dict(
        _mart(
            demo_warehouse,
            "select coalesce(app_name, package_name) || ' · ' || platform, share_on_latest "
            "from marts.app_rollout_current",
        )
    )
    drawn = stacks(view)
    assert drawn
    for app, segments in drawn.items():
        assert abs(drawn_total(segments) - expected[app]) <= view.axis("x").per_pixel, app


def test_devices_by_group_draws_each_group_s_devices(rendered, demo_warehouse, common) -> None:
    view = _view_titled(rendered, "fleet_overview", "Devices by group, largest first")
    expected = {
        common.NO_GROUP if group is None else group: devices
        for group, devices in _mart(
            demo_warehouse, "select group_path, count(*) from marts.fleet_compliance group by all"
        )
    }
    drawn = stacks(view)
    assert len(drawn) == min(30, len(expected))  # common.CHART_ITEMS (N of M: test_nothing_cut)
    for group, segments in drawn.items():
        assert len(segments) == 1, group
        expected_devices = expected[group]
        assert abs(drawn_total(segments) - expected_devices) <= view.axis("x").per_pixel, group


@pytest.mark.parametrize(
    ("title", "mart", "key"),
    [
        ("Time to completion of command requests", "command_rollout", "command_request_id"),
        ("Time to completion of operations", "operation_rollout", "operation_id"),
    ],
)  # fmt: skip
def test_time_to_completion_bars_run_from_p50_to_p90(
    rendered, demo_warehouse, title, mart, key
) -> None:
    view = _view_titled(rendered, "rollouts", title)
    expected = {
        row[0]: (row[1] / 60, row[2] / 60)
        for row in _mart(
            demo_warehouse,
            f"select left({key}, 8), p50_minutes_to_terminal, p90_minutes_to_terminal "
            f"from marts.{mart} where p90_minutes_to_terminal is not null",
        )
    }
    drawn = stacks(view)
    assert drawn
    pixel = view.axis("x").per_pixel
    for label, ((start, end),) in drawn.items():
        p50, p90 = expected[label.rsplit(" · ", 1)[1]]
        assert abs(start - p50) <= pixel and abs(end - p90) <= pixel, label


def test_version_adoption_stacks_the_shares_of_each_day(rendered, demo_warehouse) -> None:
    view = next(
        v
        for v in _drawings_views(rendered, "rollouts")
        if (v.title or "").startswith("Version adoption over time: ")
    )
    package, platform = re.search(r"\((.+)\) · (\w+)$", view.title).groups()
    expected = [
        share
        for (share,) in _mart(
            demo_warehouse,
            "select sum(share_of_reporting) from marts.app_rollout "
            f"where package_name = '{package}' and platform = '{platform}' "
            "group by day order by day",
        )
    ]
    days = area_stacks(view)
    assert len(days) == len(expected)
    pixel = view.axis("y").per_pixel
    for segments, share in zip(days, expected, strict=True):
        assert overlap(segments) <= pixel * len(segments)
        assert abs(drawn_total(segments) - share) <= pixel


def _drawings_views(rendered, page: str) -> list[View]:
    return [v for d in _drawings(rendered, page) for v in d.views]


PIPELINE_RUNS = "Pipeline runs not ended, stage by stage"
# the legend's entries that are a stage's devices done (its bar's coloured part)
DONE_PARTS = {"succeeded", "failed", "timed out", "cancelled"}


def _stage_at(x_axis, x: float) -> int:
    """The stage whose cell holds `x`: the cells span the x axis in order, each labelled at its
    middle ("Stage 1", "Stage 2", ...)."""
    half = (x_axis.ticks[1] - x_axis.ticks[0]) / 2
    (found,) = [n for n, tick in enumerate(x_axis.ticks, 1) if abs(x - tick) <= half]
    return found


def _row_at(y_axis, y: float) -> str:
    """The run whose row is nearest `y` (a row's band is centred on its tick)."""
    return min(zip(y_axis.ticks, y_axis.labels, strict=True), key=lambda t: abs(t[0] - y))[1][2]


def test_pipeline_runs_draw_each_stage_s_progress_in_stage_order(rendered, demo_warehouse) -> None:
    drawing = charts(rendered.page("rollouts").dom)[PIPELINE_RUNS]
    view = drawing.view(PIPELINE_RUNS)
    (legend,) = drawing.legends
    part_of = {colour: part for part, colour in legend.colours.items()}
    stages = {
        (run, order): (name, share, stalled, waiting)
        for run, order, name, share, stalled, waiting in _mart(
            demo_warehouse,
            "select pipeline_name || ' · run ' || run_number, stage_order, stage_name, "
            "share_done, is_stalled, waiting_for_approval_since is not null "
            "from marts.pipeline_rollout where is_run_open",
        )
    }
    x_axis, y_axis = view.axis("x"), view.axis("y")
    # one row per run not ended
    rows = [text for _, _, text in y_axis.labels]
    assert sorted(rows) == sorted({run for run, _ in stages}) and len(rows) == len(set(rows))
    # each stage's name over its own cell: the stages left to right in their order
    names = {}
    for x, y, text in view.texts:
        names.setdefault((_row_at(y_axis, y), _stage_at(x_axis, x)), []).append(text)
    for key, (name, *_) in stages.items():
        assert name in names[key], (key, names.get(key))
    # the bar of each stage reached is its devices, the coloured part the share done
    cells: dict[tuple, dict[str, float]] = {}
    for bar in view.bars():
        x0, y0, x1, y1 = bar.box
        key = (y_axis.category(y0, y1), _stage_at(x_axis, (x0 + x1) / 2))
        part = cells.setdefault(key, {})
        part[part_of[bar.fill]] = part.get(part_of[bar.fill], 0) + x1 - x0
    assert cells.keys() == stages.keys()
    for key, (_, share, _, waiting) in stages.items():
        parts = cells[key]
        if share is None:  # not reached: the stage a run waits to start, or one not started
            assert list(parts) == ["waiting for approval" if waiting else "not started"], key
            continue
        done = sum(width for p, width in parts.items() if p in DONE_PARTS)
        assert abs(done - share * sum(parts.values())) <= 1, (key, done, share)
    # the framed cells, each labelled, are exactly the mart's stalled stages
    frame = legend.colours["stalled"]
    framed = {
        (_row_at(y_axis, (m.box[1] + m.box[3]) / 2), _stage_at(x_axis, (m.box[0] + m.box[2]) / 2))
        for m in view.marks
        if m.kind != "bar" and m.fill == frame
    }
    stalled = {key for key, (*_, is_stalled, _) in stages.items() if is_stalled}
    assert stalled and framed == stalled
    # labelled with the time `status` prints for the run (marts.headlines' item, in minutes)
    unchanged = dict(_mart(
        demo_warehouse,
        "select rollout.pipeline_name || ' · run ' || rollout.run_number, item.value "
        "from marts.headlines as item inner join marts.pipeline_rollout as rollout "
        "on rollout.pipeline_run_id = item.item and rollout.is_stalled "
        "where item.headline = 'pipeline_runs_stalled'",
    ))  # fmt: skip
    for key in stalled:
        assert f"stalled {duration(unchanged[key[0]])}" in " ".join(names[key]), names[key]
    # the cells noted "failing" are exactly the mart's failing stages
    noted = {key for key, texts in names.items() if "failing" in " ".join(texts).split(" · ")}
    failing = set(_mart(demo_warehouse, "select pipeline_name || ' · run ' || run_number, "
                        "stage_order from marts.pipeline_rollout where is_failing"))  # fmt: skip
    assert failing and noted == failing
    assert any(waiting for *_, waiting in stages.values()), "the fixture has a run waiting"


def test_the_pipelines_table_shows_the_numbers_of_the_stage_it_names(
    rendered, demo_warehouse
) -> None:
    """A row of the Pipelines table is labelled with its run's current stage: its devices are
    that stage's, the ones the chart draws in that stage's cell (read from the bars' own
    data) and marts.headlines counts for a failing run ("11 of 60"), never the whole run's (an
    ended run too: its last stage's)."""
    from .test_offline_report import _tables

    dom = rendered.page("rollouts").dom
    (table,) = [t for t in _tables(dom) if t.columns[:4] == ["pipeline_name", "run_number",
                                                             "run_status", "current_stage"]]  # fmt: skip
    view = charts(dom)[PIPELINE_RUNS].view(PIPELINE_RUNS)
    drawn: dict[tuple[str, int], dict[str, int]] = {}
    for bar in view.bars():
        fields = dict(f.split(": ", 1) for f in bar.label.split("; ") if ": " in f)
        cell = drawn.setdefault((fields["run"], int(fields["stage_order"])), {})
        cell[fields["part"]] = cell.get(fields["part"], 0) + int(fields["devices"])
        cell["target"] = int(fields["target_devices"])
    failing = {
        label.split(", stage ")[0].replace(" run ", " · run "): (value, denominator)
        for label, value, denominator in _mart(
            demo_warehouse,
            "select label, value, denominator from marts.headlines "
            "where headline = 'pipeline_runs_failing' and item is not null",
        )
    }
    stages = {
        (run, order): numbers
        for run, order, *numbers in _mart(
            demo_warehouse,
            "select pipeline_name || ' · run ' || run_number, stage_order, target_devices, "
            "succeeded_devices, failed_devices + timed_out_devices, in_progress_devices "
            "from marts.pipeline_rollout",
        )
    }
    compared = headline_compared = ended = 0
    for row in table.rows:
        cells = dict(zip(table.columns, row, strict=True))
        run = f"{cells['pipeline_name']} · run {cells['run_number']}"
        if not cells["current_stage"]:
            continue  # a run at no stage yet has no stage's numbers
        order = int(cells["current_stage"].split(" of ")[0])
        n = {c: int(cells[c].replace(",", "")) for c in cells if c.endswith("_devices")}
        # every row, ended or not: the numbers of the stage it names (marts.pipeline_rollout)
        bad = n["failed_devices"] + n["timed_out_devices"]
        shown = [n["target_devices"], n["succeeded_devices"], bad, n["in_progress_devices"]]
        assert shown == stages[(run, order)], (run, order, shown, stages[(run, order)])
        if cells["run_ended_at"]:
            ended += 1
            continue  # an ended run is not drawn
        cell = drawn[(run, order)]
        assert n["target_devices"] == cell["target"], (run, n, cell)
        assert n["succeeded_devices"] == cell.get("succeeded", 0), (run, n, cell)
        assert bad == cell.get("failed", 0) + cell.get("timed out", 0), (run, n, cell)
        assert n["in_progress_devices"] == cell.get("in progress", 0), (run, n, cell)
        done = (cell["target"] - cell.get("in progress", 0)) / cell["target"]
        assert cells["share_done"] == f"{done:.1%}", (run, cells["share_done"], done)
        if run in failing:  # the table lists each pipeline's latest run only
            assert (bad, n["target_devices"]) == failing[run], run
            headline_compared += 1
        compared += 1
    assert compared >= 2 and headline_compared >= 1 and ended >= 1, (compared, ended, failing)


ADOPTION = "Adoption of the current versions"
CURRENT_VERSIONS = """
    select
        coalesce(version.app_name, version.package_name) || ' ' || version.version_name || ' · '
            || version.platform,
        rollout.day, rollout.share_of_reporting
    from marts.app_version_rollout as version
    inner join marts.app_rollout as rollout
        on rollout.platform = version.platform and rollout.package_name = version.package_name
        and rollout.version_name is not distinct from version.version_name
    where version.is_latest_version
    order by version.first_seen_at desc, version.platform, version.package_name, rollout.day
"""


def test_current_version_adoption_draws_each_current_version_s_share_per_day(
    rendered, demo_warehouse
) -> None:
    """One line per current version (marts.app_version_rollout `is_latest_version`), the newest
    first as many as the title says ("N of M"), each named in the legend; each line's points sit
    on the days marts.app_rollout has for that version, at its share of reporting devices that
    day, to a pixel (read from the lines' and the points' geometry against the axes)."""
    view = _view_titled(rendered, "rollouts", ADOPTION)
    (legend,) = charts(rendered.page("rollouts").dom)[view.title].legends
    expected: dict[str, dict[int, float]] = {}
    days = [d for (d,) in _mart(demo_warehouse, "select distinct day from marts.app_rollout "
                                                "order by day")]  # fmt: skip
    for version, day, share in _mart(demo_warehouse, CURRENT_VERSIONS):
        expected.setdefault(version, {})[days.index(day)] = share
    newest = list(expected)[: len(legend.labels)]
    assert [text for _, _, text in legend.labels] == newest
    assert len(newest) == min(8, len(expected))
    shown = f"({len(newest)} of {len(expected)};" if len(newest) < len(expected) else None
    assert shown is None or shown in view.title, view.title
    version_of = {colour: version for version, colour in legend.colours.items()}
    x_axis, y_axis = view.axis("x"), view.axis("y")
    assert len(x_axis.ticks) == len(days)  # one tick per day loaded

    def drawn(points: list[tuple[float, float]]) -> dict[int, float]:
        """Each point's day (the tick under it) and its value on the y axis."""
        out = {}
        for x, y in points:
            (day,) = [n for n, tick in enumerate(x_axis.ticks) if abs(x - tick) <= 1]
            out[day] = y_axis.value(y)
        return out

    lines = [m for m in view.marks if m.kind == "line mark"]
    assert sorted(version_of[m.stroke] for m in lines) == sorted(newest)
    dots: dict[str, list[tuple[float, float]]] = {}
    for mark in (m for m in view.marks if m.kind == "point"):
        x0, y0, x1, y1 = mark.box
        dots.setdefault(version_of[mark.fill], []).append(((x0 + x1) / 2, (y0 + y1) / 2))
    pixel = y_axis.per_pixel
    for line in lines:
        version = version_of[line.stroke]
        for shares in (drawn(line.points), drawn(dots[version])):
            assert shares.keys() == expected[version].keys(), (version, shares)
            for day, share in expected[version].items():
                assert abs(shares[day] - share) <= pixel, (version, days[day], shares[day], share)
