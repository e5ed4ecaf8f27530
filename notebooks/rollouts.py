import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Rollouts")


@app.cell
def _():
    import _common as common
    import altair as alt
    import marimo as mo
    import polars as pl
    from esper_warehouse.pipelines import readable

    return alt, common, mo, pl, readable


@app.cell
def _(mo):
    mo.md(
        """
        # Rollouts: how far has each one got?

        **Pipelines**: the stages of each Esper Pipelines run not yet ended, and which wait
        for an approval, have stalled or are failing.
        **Apps**: which share of the devices that reported their apps runs each version, day by
        day. Devices that never reported their apps are shown apart, never counted as behind.
        **Commands and operations**: per request, how many target devices succeeded, failed,
        timed out or are still in flight, and how long a device took from the status being
        created to its final state (p50 and p90). Pick a row in a table to see its devices.
        A p90 bar that ends at exactly 48 h is not a cut-off in the warehouse: a command sent to
        devices that are offline ends as `timeout` 48 hours after it was queued, so when a tenth
        or more of the targets were offline, the p90 is that timeout.
        """
    )
    return


@app.cell
def _(common):
    wh = common.open_warehouse(
        required=(
            "marts.app_rollout",
            "marts.app_rollout_current",
            "marts.command_rollout",
            "marts.operation_rollout",
            "marts.headlines",  # built with failing_rank, which the "Most failing" tables read
        ),
    )
    common.banner(wh)
    return (wh,)


@app.cell
def _(alt, common, pl):
    # Shared by the command and the operation sections.
    OUTCOME_COLUMNS = {outcome: f"{outcome}_devices" for outcome in common.OUTCOMES}

    def outcome_chart(frame: pl.DataFrame, title: str) -> alt.Chart:
        """Share of target devices per outcome, one bar per rollout."""
        long = frame.unpivot(
            index=["label", "created_at", "target_devices"],
            on=list(OUTCOME_COLUMNS.values()),
            variable_name="outcome",
            value_name="devices",
        ).with_columns(pl.col("outcome").replace({v: k for k, v in OUTCOME_COLUMNS.items()}))
        return (
            alt.Chart(long, title=title)
            .mark_bar()
            .encode(
                y=alt.Y(
                    "label:N",
                    title=None,
                    sort=alt.SortField("created_at", order="descending"),
                    axis=alt.Axis(labelLimit=320),
                ),
                x=alt.X(
                    "devices:Q",
                    stack="normalize",
                    title="Share of target devices",
                    axis=alt.Axis(format="%"),
                ),
                color=common.outcome_color(),
                order=alt.Order("outcome_order:Q"),
                tooltip=["label", "outcome", "devices", "target_devices"],
            )
            .transform_calculate(outcome_order=f"indexof({list(OUTCOME_COLUMNS)}, datum.outcome)")
            .properties(width=520, height=alt.Step(18))
        )

    def duration_chart(frame: pl.DataFrame, title: str) -> alt.LayerChart:
        """p50 (dot) to p90 (end of bar) minutes to a final state, slowest first."""
        data = frame.filter(pl.col("p90_minutes_to_terminal").is_not_null()).with_columns(
            (pl.col("p50_minutes_to_terminal") / 60).alias("p50_hours"),
            (pl.col("p90_minutes_to_terminal") / 60).alias("p90_hours"),
        )
        base = alt.Chart(data, title=title).encode(
            y=alt.Y(
                "label:N",
                title=None,
                sort=alt.SortField("p90_hours", order="descending"),
                axis=alt.Axis(labelLimit=320),
            ),
            tooltip=[
                "label",
                alt.Tooltip("p50_hours:Q", format=".1f", title="p50 (hours)"),
                alt.Tooltip("p90_hours:Q", format=".1f", title="p90 (hours)"),
                "terminal_devices",
            ],
        )
        bars = base.mark_bar(color="#9ecae1", height=10).encode(
            x=alt.X("p50_hours:Q", title="Hours to a final state (dot p50, bar end p90)"),
            x2="p90_hours:Q",
        )
        dots = base.mark_point(filled=True, color="#2f6fb0", size=60).encode(x="p50_hours:Q")
        return (bars + dots).properties(width=520, height=alt.Step(18))

    def rollout_label(kind: str) -> str:
        """SQL for a short unique label of a request or an operation."""
        if kind == "command":
            return (
                "command || ' · ' || strftime(created_at, '%b %d %H:%M') "
                "|| ' · ' || left(command_request_id, 8)"
            )
        return (
            "coalesce(operation_alias, operation_type) || ' · ' "
            "|| strftime(created_at, '%b %d %H:%M') || ' · ' || left(operation_id, 8)"
        )

    return duration_chart, outcome_chart, rollout_label


@app.cell
def _(mo):
    mo.md(
        """
        ## Pipelines

        An admin stages a release with **Esper Pipelines**: a pipeline of stages, each sent to
        its devices once the stage before has ended (or once someone approves it). Each run not
        ended is a row below, its stages left to right in their order; a stage's bar is its
        devices by outcome, so the coloured part is the share done; a stalled stage is framed,
        a failing one noted under its bar. The three numbers are read from `marts.headlines`, as
        `esper-warehouse status` prints them.
        """
    )
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    pipelines_loaded = wh.has("marts.pipeline_rollout") and wh.has("marts.pipeline_rollout_current")
    # what the last load could not read of Pipelines (a key without read:pipeline: 403)
    pipelines_skipped = {
        table: why
        for table, why in common.skipped_by_last_run().items()
        if table.startswith("pipeline")
    }
    pipeline_stages = common.query(
        """
        select
            pipeline_name || ' · run ' || run_number || case
                when count(distinct pipeline_id) over (partition by pipeline_name) > 1
                    then ' · ' || left(pipeline_id, 8)
                else ''
            end as run,
            pipeline_run_id, run_status, stage_order, stage_name, status, target_devices,
            succeeded_devices, failed_devices, timed_out_devices, cancelled_devices,
            in_progress_devices, share_done, is_stalled, is_failing, waiting_for_approval_since,
            -- the whole minutes marts.headlines holds for the run (what status prints)
            waiting.value as minutes_waiting,
            stalled.value as minutes_unchanged,
        from marts.pipeline_rollout as rollout
        left join marts.headlines as waiting
            on waiting.headline = 'pipeline_runs_waiting'
            and waiting.item = rollout.pipeline_run_id
        left join marts.headlines as stalled
            on stalled.headline = 'pipeline_runs_stalled'
            and stalled.item = rollout.pipeline_run_id
        where is_run_open
        order by pipeline_name, run_number, pipeline_run_id, stage_order
        """
        if pipelines_loaded
        else "select null where false"
    )
    pipeline_runs_loaded = (
        common.scalar("select count(*) from marts.pipeline_rollout_current")
        if pipelines_loaded
        else 0
    )
    return pipeline_runs_loaded, pipeline_stages, pipelines_loaded, pipelines_skipped


@app.cell
def _(common, pl, readable):
    # A stage's cell spans [order - 1, order] on the x axis, less a gap on each side; its bar is
    # its devices by outcome (the outcome colours of the charts above), so the coloured part is
    # its share done. A stalled stage is framed; the stage a run waits to start is its own colour.
    STAGE_GAP = 0.04
    STAGE_PARTS = {"succeeded": ("success", "succeeded_devices"),
                   "failed": ("failure", "failed_devices"),
                   "timed out": ("timeout", "timed_out_devices"),
                   "cancelled": ("cancelled", "cancelled_devices"),
                   "in progress": ("pending", "in_progress_devices")}  # fmt: skip
    # "stalled" as the tiles above define it (marts.headlines, pipeline_runs_stalled)
    WAITING, NOT_STARTED, STALLED = "waiting for approval", "not started", "stalled"
    FAILING = "failing"  # as the tiles above define it (pipeline_runs_failing)
    _outcome_colour = dict(zip(common.OUTCOMES, common.OUTCOME_COLORS, strict=True))
    STAGE_COLOURS = {
        **{part: _outcome_colour[outcome] for part, (outcome, _) in STAGE_PARTS.items()},
        WAITING: "#f5c518",
        NOT_STARTED: "#e4e4e4",
        STALLED: "#1b1b1b",
    }

    def stage_note(row: dict) -> str:
        """What a stage's cell says under its bar."""
        if row["waiting_for_approval_since"] is not None:
            return f"{WAITING}, {readable.duration(row['minutes_waiting'])}"
        if not row["target_devices"]:
            return NOT_STARTED if row["status"] == "not_started" else f"{row['status']}, no devices"
        notes = [f"{row['share_done']:.0%} done"]
        if row["is_stalled"]:
            notes.append(f"stalled {readable.duration(row['minutes_unchanged'])}")
        if row["is_failing"]:  # the share failed or timed out is the bar's red and orange parts
            notes.append(FAILING)
        return " · ".join(notes)

    def stage_cells(stages: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The bars (one per outcome of each stage reached, one per stage not reached) and the
        cells (one per stage: its name, its note, its frame when stalled)."""
        width, bars, cells = 1 - 2 * STAGE_GAP, [], []
        for row in stages.iter_rows(named=True):
            left = row["stage_order"] - 1 + STAGE_GAP
            cell = {"run": row["run"], "stage_order": row["stage_order"],
                    "stage": row["stage_name"], "status": row["status"],
                    "target_devices": row["target_devices"], "note": stage_note(row)}  # fmt: skip
            cells.append({**cell, "x": left, "x2": left + width, "stalled": row["is_stalled"]})
            if not row["target_devices"]:
                part = WAITING if row["waiting_for_approval_since"] is not None else NOT_STARTED
                bars.append({**cell, "part": part, "devices": 0, "x": left, "x2": left + width})
                continue
            for part, (_, column) in STAGE_PARTS.items():
                if row[column]:
                    right = left + width * row[column] / row["target_devices"]
                    bars.append({**cell, "part": part, "devices": row[column], "x": left,
                                 "x2": right})  # fmt: skip
                    left = right
        return pl.DataFrame(bars), pl.DataFrame(cells)

    return STAGE_COLOURS, STAGE_GAP, STALLED, stage_cells


@app.cell
def _(STAGE_COLOURS, STAGE_GAP, STALLED, alt, pl, stage_cells):
    def pipeline_chart(stages: pl.DataFrame, title: str) -> alt.LayerChart:
        """Each run of `stages` (marts.pipeline_rollout, runs not ended) as a row, its stages
        left to right: the bar of a stage's devices by outcome, its name above, its note below."""
        bars, cells = stage_cells(stages)
        frames = cells.filter(pl.col("stalled")).with_columns(
            pl.lit(STALLED).alias("part"), pl.col("x") - STAGE_GAP / 2, pl.col("x2") + STAGE_GAP / 2
        )
        drawn = set(bars["part"]) | set(frames["part"])
        parts = [p for p in STAGE_COLOURS if p in drawn]
        color = alt.Color(
            "part:N",
            title="Devices of a stage, or the stage",
            scale=alt.Scale(domain=parts, range=[STAGE_COLOURS[p] for p in parts]),
            sort=parts,
            legend=alt.Legend(columns=4, titleLimit=400),
        )
        stages_n = int(stages["stage_order"].max())
        cell_px = max(170, 600 // stages_n)
        y = alt.Y("run:N", title=None, sort=list(dict.fromkeys(stages["run"])),
                  axis=alt.Axis(labelLimit=320))  # fmt: skip
        x = alt.X(
            "x:Q",
            title="Stages in their order (a stage's bar: its devices by outcome)",
            scale=alt.Scale(domain=[0, stages_n], nice=False, zero=True),
            # a label at the middle of each stage's cell, which spans [n - 1, n]
            axis=alt.Axis(values=[n + 0.5 for n in range(stages_n)], grid=False,
                          labelExpr="'Stage ' + (datum.value + 0.5)"),
        )  # fmt: skip
        tooltip = ["run", "stage_order", "stage", "status", "target_devices", "note"]
        layers = [
            alt.Chart(frames).mark_rect(height=24).encode(y=y, x=x, x2="x2:Q", color=color),
            alt.Chart(bars).mark_bar(height=16).encode(
                y=y, x=x, x2="x2:Q", color=color, tooltip=[*tooltip, "part", "devices"]
            ),
            alt.Chart(cells).mark_text(align="left", dy=-21, fontSize=11, limit=cell_px - 16)
            .encode(y=y, x=x, text="stage:N", tooltip=tooltip),
            alt.Chart(cells).mark_text(align="left", dy=21, fontSize=10, color="#3d3d3d",
                                       limit=cell_px - 16)
            .encode(y=y, x=x, text="note:N", tooltip=tooltip),
        ]  # fmt: skip
        return alt.layer(*layers, title=title).properties(
            width=cell_px * stages_n, height=alt.Step(60)
        )

    return (pipeline_chart,)


@app.cell
def _(
    common,
    mo,
    pipeline_chart,
    pipeline_runs_loaded,
    pipeline_stages,
    pipelines_loaded,
    pipelines_skipped,
):
    # how old the Pipelines numbers are, or why unknown: the mart's words (marts.headlines)
    _age = common.headlines().get("pipeline_runs_waiting", {}).get("age_note")
    # the run list's refusal says why for all six tables (each child names it as "read from")
    _why = pipelines_skipped.get("pipeline_runs") or next(iter(pipelines_skipped.values()), "")
    _refused = (
        mo.callout(
            mo.md(
                (f"**{common.text(_age)}**. " if _age else "")
                + f"The last load could not read Esper Pipelines: {common.text(_why)}. It skipped "
                f"{', '.join(common.code(t) for t in pipelines_skipped)}. A key without the "
                "`read:pipeline` scope is refused (403), a tenant without Pipelines answers 404; "
                "what is shown here is what an earlier load read, if any."
            ),
            kind="warn",
        )
        if pipelines_skipped
        else mo.callout(mo.md(common.text(_age)), kind="warn")
        if _age
        else None
    )
    mo.stop(
        not pipelines_loaded,
        common.nothing(
            "This warehouse has no Esper Pipelines marts yet: build the models "
            "(`esper-warehouse models`)."
        ),
    )
    mo.stop(
        not pipeline_runs_loaded,
        _refused
        or common.nothing(
            "No Esper Pipelines run has been loaded: the tenant has not run a pipeline."
        ),
    )
    _h = common.headlines()  # the three numbers' one home: marts.headlines
    _tiles = [
        mo.stat(
            common.headline_value(_h[_name]),
            label=_h[_name]["label"].removesuffix(" (of runs not ended)"),
            caption=common.aged(
                _h[_name],
                f"of {_h[_name]['denominator']:,} runs not ended"
                if _h[_name]["denominator"] is not None
                else "",
            ),
        )
        for _name in ("pipeline_runs_waiting", "pipeline_runs_stalled", "pipeline_runs_failing")
        if _name in _h
    ]
    pipeline_runs_chart = (
        pipeline_chart(pipeline_stages, "Pipeline runs not ended, stage by stage")
        if pipeline_stages.height
        else None
    )
    mo.vstack(
        [
            *([_refused] if _refused else []),
            mo.hstack(_tiles, widths="equal"),
            pipeline_runs_chart
            if pipeline_runs_chart is not None
            else common.nothing("No pipeline run is in progress: every run loaded has ended."),
        ]
    )
    return (pipeline_runs_chart,)


@app.cell
def _(common, mo, pipeline_runs_loaded, pipelines_loaded):
    mo.stop(not pipelines_loaded or not pipeline_runs_loaded)
    # durations in minutes, read as hours or days (`readable.duration`, via `rate_formats`)
    # A row is labelled with its run's current stage, so its devices are that stage's
    # (marts.pipeline_rollout), as the chart above and marts.headlines count them; the mart's
    # own device columns add up every stage reached.
    pipelines_now = common.query(
        """
        select
            run.pipeline_name, run.run_number, run.run_status,
            run.current_stage_order || ' of ' || run.stages || ' · ' || run.current_stage_name
                as current_stage,
            run.current_stage_status, stage.target_devices, stage.succeeded_devices,
            stage.failed_devices, stage.timed_out_devices, stage.cancelled_devices,
            stage.in_progress_devices, stage.share_done,
            run.waiting_for_approval_since,
            epoch(run.data_as_of - run.waiting_for_approval_since) / 60
                as time_waiting_for_approval,
            case
                when run.run_ended_at is null then epoch(run.data_as_of - run.run_updated_at) / 60
            end as time_since_last_change,
            run.is_stalled, run.is_failing, run.run_started_at, run.run_ended_at,
        from marts.pipeline_rollout_current as run
        left join marts.pipeline_rollout as stage
            on stage.pipeline_run_id = run.pipeline_run_id
            and stage.stage_order = run.current_stage_order
        order by run.run_ended_at is not null, run.pipeline_name, run.pipeline_id
        """
    )
    pipeline_failures = common.query(
        """
        with reasons as (
            select *, unnest(top_failure_reasons) as top
            from marts.pipeline_rollout
            where is_failing
        )
        select
            pipeline_name, run_number, stage_order || ' · ' || stage_name as stage,
            target_devices, failed_devices, timed_out_devices,
            (failed_devices + timed_out_devices) / target_devices as failed_or_timed_out_rate,
            top.reason, top.devices as devices_with_reason,
            array_to_string(top.device_names, ', ') as first_devices_by_name,
        from reasons
        order by pipeline_name, run_number, stage_order, top.devices desc, top.reason
        """
    )
    _share = {"share_done": common.percent}
    mo.vstack(
        [
            common.table(
                pipelines_now,
                "pipelines_now",
                format_mapping={**common.rate_formats(pipelines_now), **_share},
                page_size=15,
                label="Each pipeline's latest run (marts.pipeline_rollout_current), its "
                "devices those of its current stage (marts.pipeline_rollout)",
            ),
            mo.md(
                "**Failing stages**: the current stage of each run counted as failing above "
                "(`is_failing`), and its top failure reasons (the reason of the command behind "
                "each device's target run)."
            ),
            common.table(
                pipeline_failures,
                "pipeline_failures",
                format_mapping=common.rate_formats(pipeline_failures),
                page_size=15,
                label="Failing stages of runs not ended, by reason",
            )
            if pipeline_failures.height
            else common.nothing("No run not ended is failing on its current stage."),
        ]
    )
    return pipeline_failures, pipelines_now


@app.cell
def _(mo):
    mo.md("""## App versions""")
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    apps_now = common.query(
        """
        select
            app_name, package_name, platform, latest_version, devices_with_app,
            devices_on_latest, devices_on_older, share_on_latest, reporting_devices,
            not_reporting_devices, required_min_version, devices_below_required
        from marts.app_rollout_current
        order by devices_with_app desc, package_name, platform
        """
    )
    return (apps_now,)


@app.cell
def _(alt, apps_now, common, mo, pl):
    mo.stop(apps_now.height == 0, common.nothing("No app inventory has been loaded yet."))
    _top, _title = common.top(
        apps_now.with_columns(
            (
                pl.col("app_name").fill_null(pl.col("package_name")) + " · " + pl.col("platform")
            ).alias("app"),
            (pl.col("devices_with_app") / pl.col("reporting_devices")).alias("share_with_app"),
        ),
        "Apps now: share of reporting devices on the latest version",
        "the most installed; every app: the table below",
    )
    _latest = (
        alt.Chart(_top, title=_title)
        .mark_bar(color="#2e8540")
        .encode(
            y=alt.Y("app:N", title=None, sort="-x"),
            x=alt.X(
                "share_on_latest:Q",
                title="On the latest version",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=[
                "app",
                "latest_version",
                "devices_on_latest",
                "devices_on_older",
                alt.Tooltip("share_on_latest:Q", format=".1%"),
                "not_reporting_devices",
            ],
        )
    )
    _installed = (
        alt.Chart(_top)
        .mark_tick(color="#3d3d3d", thickness=2, size=16)
        .encode(y=alt.Y("app:N", sort="-x"), x="share_with_app:Q")
    )
    apps_now_chart = (_installed + _latest).properties(width=460, height=alt.Step(22))
    mo.vstack(
        [
            apps_now_chart,
            mo.md("_Green: on the latest version; black tick: has the app at any version._"),
        ]
    )
    return (apps_now_chart,)


@app.cell
def _(alt, common, mo, pl, wh):
    mo.stop(not wh.ok or not wh.has("marts.app_version_rollout"))
    # The current version of each app on each platform (marts.app_version_rollout,
    # is_latest_version), newest first: its share of reporting devices on each day of
    # marts.app_rollout, whose rows of a version begin on its first day in the fleet.
    _current = common.query(
        """
        select
            coalesce(version.app_name, version.package_name) || ' ' || version.version_name
                || ' · ' || version.platform as version,
            rollout.day, rollout.share_of_reporting, rollout.devices_on_version,
            rollout.reporting_devices, version.first_seen_at, version.age_note,
        from marts.app_version_rollout as version
        inner join marts.app_rollout as rollout
            on rollout.platform = version.platform
            and rollout.package_name = version.package_name
            and rollout.version_name is not distinct from version.version_name
        where version.is_latest_version
        order by version.first_seen_at desc, version.platform, version.package_name, rollout.day
        """
    )
    mo.stop(_current.height == 0, common.nothing("No current app version to draw yet."))
    # The theme's eight colours tell eight lines apart: the newest eight, the rest in the table.
    _all = list(dict.fromkeys(_current["version"]))
    _shown = _all[:8]
    _title = common.titled(
        "Adoption of the current versions, newest first", len(_shown), len(_all),
        "every app and its latest version: the table below",
    )  # fmt: skip
    current_adoption_chart = (
        alt.Chart(_current.filter(pl.col("version").is_in(_shown)), title=_title)
        .mark_line(point=True)
        .encode(
            x=alt.X("day:T", title="Day (UTC)", axis=alt.Axis(format="%b %d", tickCount="day")),
            y=alt.Y(
                "share_of_reporting:Q",
                title="Share of reporting devices on the version",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "version:N",
                title="Current version (app, version · platform)",
                sort=_shown,
                legend=alt.Legend(orient="right", labelLimit=400, titleLimit=400),
            ),
            tooltip=[
                "version",
                "day:T",
                "devices_on_version",
                "reporting_devices",
                alt.Tooltip("share_of_reporting:Q", format=".1%"),
            ],
        )
        .properties(width=520, height=260)
    )
    # how old these numbers are (the devices family's age: the mart's own words), when older
    _age = common.aged(_current.row(0, named=True), None, markdown=True)
    mo.vstack(
        [
            current_adoption_chart,
            mo.md(
                "_Each line: a current version's share of the devices that reported their apps, "
                "from its first day in the fleet (or the first day loaded)._"
                + (f" **{_age}**" if _age else "")
            ),
        ]
    )
    return (current_adoption_chart,)


@app.cell
def _(apps_now, common, mo):
    mo.stop(apps_now.height == 0)
    _options = {
        f"{r['app_name'] or r['package_name']} ({r['package_name']}) · {r['platform']}": (
            f"{r['platform']}|{r['package_name']}"
        )
        for r in apps_now.iter_rows(named=True)
    }
    # Open on the rollout in progress: the app whose newest version gained the most share over
    # the loaded days (else the most installed app, first in the list).
    _moving = common.query(
        """
        with newest as (
            select platform, package_name, max(version_key) as version_key
            from marts.app_rollout
            group by all
        ),
        shares as (
            select
                rollout.platform,
                rollout.package_name,
                rollout.day,
                sum(rollout.share_of_reporting) as share,
            from marts.app_rollout as rollout
            inner join newest using (platform, package_name, version_key)
            group by all
        )
        select platform || '|' || package_name as choice
        from shares
        group by all
        having max(share) - min(share) > 0
        order by max(share) - min(share) desc
        limit 1
        """
    )
    _by_value = {v: k for k, v in _options.items()}
    _default = (_by_value.get(_moving["choice"][0]) if _moving.height else None) or next(
        iter(_options)
    )
    app_choice = mo.ui.dropdown(options=_options, value=_default, label="App")
    app_choice
    return (app_choice,)


@app.cell
def _(alt, app_choice, common, mo, pl):
    _platform, _package = app_choice.value.split("|", 1)
    adoption = common.query(
        """
        select day, version_name, version_key, devices_on_version, share_of_reporting,
            reporting_devices, not_reporting_devices
        from marts.app_rollout
        where platform = ? and package_name = ?
        order by day, version_key
        """,
        [_platform, _package],
    )
    # The six most installed versions by name, highest first; the rest grouped as "older/other".
    _versions = (
        adoption.group_by("version_name")
        .agg(pl.col("devices_on_version").max(), pl.col("version_key").first())
        .sort("devices_on_version", descending=True)
        .head(6)
        .sort("version_key", descending=True, nulls_last=True)["version_name"]
        .to_list()
    )
    _shown = (
        adoption.with_columns(
            pl.when(pl.col("version_name").is_in(_versions))
            .then(pl.col("version_name"))
            .otherwise(pl.lit("other versions"))
            .alias("version")
        )
        .group_by("day", "version")
        .agg(pl.col("share_of_reporting").sum(), pl.col("devices_on_version").sum())
    )
    adoption_chart = (
        alt.Chart(_shown, title=f"Version adoption over time: {app_choice.selected_key}")
        .mark_area(line=True, opacity=0.85)
        .encode(
            x=alt.X("day:T", title=None, axis=alt.Axis(format="%b %d", tickCount="day")),
            y=alt.Y(
                "share_of_reporting:Q",
                stack=True,
                title="Share of reporting devices",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("version:N", title="Version", sort=[*_versions, "other versions"]),
            order=alt.Order("version_order:Q"),
            tooltip=[
                "day:T",
                "version",
                "devices_on_version",
                alt.Tooltip("share_of_reporting:Q", format=".1%"),
            ],
        )
        .transform_calculate(
            version_order=f"indexof({[*_versions, 'other versions']}, datum.version)"
        )
        .properties(width=560, height=260)
    )
    _last = adoption.sort("day").tail(1)
    _note = (
        f"On the last day, {_last['reporting_devices'][0]:,} devices had reported their apps; "
        f"{_last['not_reporting_devices'][0]:,} never had (left out of the shares)."
        if _last.height
        else ""
    )
    mo.vstack([adoption_chart, mo.md(_note)])
    return adoption, adoption_chart


@app.cell
def _(apps_now, common, mo, pl):
    mo.accordion(
        {
            f"Every app now ({apps_now.height:,})": common.table(
                apps_now.with_columns(pl.col("share_on_latest").round(3)), "apps_now", page_size=15
            )
        }
    )
    return


@app.cell
def _(mo):
    mo.md("""## Commands""")
    return


@app.cell
def _(common, mo, rollout_label, wh):
    mo.stop(not wh.ok)
    commands = common.query(
        f"""
        select
            {rollout_label("command")} as label,
            command_request_id as id,
            *
        from marts.command_rollout
        where target_devices > 0
        order by created_at desc
        """
    )
    return (commands,)


@app.cell
def _(commands, common, mo, outcome_chart):
    mo.stop(commands.height == 0, common.nothing("No command request with targets yet."))
    command_outcomes_chart = outcome_chart(
        *common.top(
            commands,
            "Command outcomes per request, most recent first",
            "every request: the tables below",
        )
    )
    _targets = commands["target_devices"].sum()
    mo.vstack(
        [
            mo.hstack(
                [
                    mo.stat(f"{commands.height:,}", label="Requests"),
                    mo.stat(
                        f"{commands['success_devices'].sum() / _targets:.0%}",
                        label="Device success rate",
                        caption=f"of {_targets:,} targeted devices",
                    ),
                    mo.stat(
                        f"{(~commands['is_complete']).sum():,}",
                        label="Still in flight",
                        caption="requests with a device not final",
                    ),
                ],
                widths="equal",
            ),
            command_outcomes_chart,
        ]
    )
    return (command_outcomes_chart,)


@app.cell
def _(commands, common, duration_chart, mo, pl):
    mo.stop(commands.height == 0)
    command_duration_chart = duration_chart(
        *common.top(
            commands.filter(pl.col("p90_minutes_to_terminal").is_not_null()).sort(
                "p90_minutes_to_terminal", descending=True
            ),
            "Time to completion of command requests, slowest first",
            "every request: the table below",
        )
    )
    command_duration_chart
    return (command_duration_chart,)


@app.cell
def _(commands, common, mo, pl):
    mo.stop(commands.height == 0)
    _columns = [
        "failing_rank",
        "label",
        "target_devices",
        "success_rate",
        "failure_rate",
        "timeout_rate",
        "pending_devices",
        "p50_minutes_to_terminal",
        "p90_minutes_to_terminal",
        "top_failure_reasons",
    ]
    _view = commands.with_columns(
        pl.col("top_failure_reasons").list.eval(pl.element().struct.field("reason")).list.join("; ")
    ).select(*_columns, "id")
    failing_commands, slow_commands = common.worst_rollouts(
        _view, "command requests", common.ranked_from_devices()
    )
    mo.vstack([failing_commands, slow_commands])
    return failing_commands, slow_commands


@app.cell
def _(common, failing_commands, mo, slow_commands):
    _id, _label = common.picked_row(failing_commands, slow_commands)
    command_devices = common.query(
        """
        select
            d.device_name, d.platform, d.group_path, s.state, s.reason, s.created_at,
            s.updated_at,
            epoch(s.updated_at - s.created_at) / 60 as time_since_created
        from staging.stg_esper__command_statuses as s
        left join intermediate.int_devices_current as d on d.device_id = s.device_id
        where s.command_request_id = ?
        qualify row_number() over (
            partition by s.device_id order by s.updated_at desc nulls last
        ) = 1
        order by s.state <> 'failure', s.state <> 'timeout', s.is_terminal, d.device_name
        """,
        [_id],
    )
    mo.vstack(
        [
            mo.md(
                f"### Devices of {common.code(_label)}\n"
                "_Pick a row above to drill into another request._"
            ),
            common.table(
                command_devices,
                "command_devices",
                format_mapping=common.rate_formats(command_devices),
                page_size=15,
            ),
        ]
    )
    return (command_devices,)


@app.cell
def _(mo):
    mo.md("""## Operations""")
    return


@app.cell
def _(common, mo, rollout_label, wh):
    mo.stop(not wh.ok)
    operations = common.query(
        f"""
        select
            {rollout_label("operation")} as label,
            operation_id as id,
            *
        from marts.operation_rollout
        where target_devices > 0
        order by created_at desc
        """
    )
    return (operations,)


@app.cell
def _(common, duration_chart, mo, operations, outcome_chart, pl):
    mo.stop(operations.height == 0, common.nothing("No operation with targets yet."))
    operation_outcomes_chart = outcome_chart(
        *common.top(
            operations,
            "Operation outcomes, most recent first",
            "every operation: the tables below",
        )
    )
    operation_duration_chart = duration_chart(
        *common.top(
            operations.filter(pl.col("p90_minutes_to_terminal").is_not_null()).sort(
                "p90_minutes_to_terminal", descending=True
            ),
            "Time to completion of operations, slowest first",
            "every operation: the table below",
        )
    )
    mo.vstack([operation_outcomes_chart, operation_duration_chart])
    return operation_duration_chart, operation_outcomes_chart


@app.cell
def _(common, mo, operations, pl):
    mo.stop(operations.height == 0)
    _view = operations.with_columns(
        pl.col("top_failure_reasons").list.eval(pl.element().struct.field("reason")).list.join("; ")
    ).select(
        "failing_rank",
        "label",
        "state",
        "target_devices",
        "success_rate",
        "failure_rate",
        "timeout_rate",
        "pending_devices",
        "p50_minutes_to_terminal",
        "p90_minutes_to_terminal",
        "top_failure_reasons",
        "id",
    )
    failing_operations, slow_operations = common.worst_rollouts(
        _view, "operations", common.ranked_from_devices()
    )
    mo.vstack([failing_operations, slow_operations])
    return failing_operations, slow_operations


@app.cell
def _(common, failing_operations, mo, slow_operations):
    _id, _label = common.picked_row(failing_operations, slow_operations)
    operation_devices = common.query(
        """
        select
            d.device_name, d.platform, d.group_path, o.state, o.reason, o.created_at,
            o.updated_at,
            epoch(o.updated_at - o.created_at) / 60 as time_since_created
        from staging.stg_esper__operation_devices as o
        left join intermediate.int_devices_current as d on d.device_id = o.device_id
        where o.operation_id = ?
        qualify row_number() over (
            partition by coalesce(o.device_id, o.operation_device_id)
            order by o.updated_at desc nulls last
        ) = 1
        order by o.state <> 'failure', o.state <> 'timeout', o.is_terminal, d.device_name
        """,
        [_id],
    )
    mo.vstack(
        [
            mo.md(
                f"### Devices of {common.code(_label)}\n"
                "_Pick a row above to drill into another one._"
            ),
            common.table(
                operation_devices,
                "operation_devices",
                format_mapping=common.rate_formats(operation_devices),
                page_size=15,
            ),
        ]
    )
    return (operation_devices,)


if __name__ == "__main__":
    app.run()
