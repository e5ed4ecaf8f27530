import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Rollouts")


@app.cell
def _():
    import _common as common
    import altair as alt
    import marimo as mo
    import polars as pl

    return alt, common, mo, pl


@app.cell
def _(mo):
    mo.md(
        """
        # Rollouts: how far has each one got?

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
    _top = apps_now.head(15).with_columns(
        (pl.col("app_name").fill_null(pl.col("package_name")) + " · " + pl.col("platform")).alias(
            "app"
        ),
        (pl.col("devices_with_app") / pl.col("reporting_devices")).alias("share_with_app"),
    )
    _latest = (
        alt.Chart(_top, title="Apps now: share of reporting devices on the latest version")
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
        commands.head(30), "Command outcomes per request (30 most recent)"
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
def _(commands, duration_chart, mo, pl):
    mo.stop(commands.height == 0)
    command_duration_chart = duration_chart(
        commands.sort("p90_minutes_to_terminal", descending=True, nulls_last=True).head(20),
        "Time to completion: the 20 slowest command requests",
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
    failing_commands, slow_commands = common.worst_rollouts(_view, "command requests")
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
def _(common, duration_chart, mo, operations, outcome_chart):
    mo.stop(operations.height == 0, common.nothing("No operation with targets yet."))
    operation_outcomes_chart = outcome_chart(
        operations.head(30), "Operation outcomes (30 most recent)"
    )
    operation_duration_chart = duration_chart(
        operations.sort("p90_minutes_to_terminal", descending=True, nulls_last=True).head(20),
        "Time to completion: the 20 slowest operations",
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
    failing_operations, slow_operations = common.worst_rollouts(_view, "operations")
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
