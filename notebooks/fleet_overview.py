import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Fleet overview")


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
        # Fleet overview: is my fleet compliant?

        How many devices, on which platforms and in which groups; how many pass every compliance
        check today and how that moved day by day; what the non-compliant ones fail on; and which
        devices no longer check in. A device not seen recently enough for its report to
        be judged (the last-seen buckets below), or that never reported a value a check needs,
        is **unverified**, never compliant. Thresholds and targets live in `sql/seeds/`.
        """
    )
    return


@app.cell
def _(common):
    wh = common.open_warehouse(
        required=(
            "marts.fleet_compliance",
            "marts.fleet_compliance_daily",
            "marts.compliance_reasons",
            "marts.stale_devices",
            "marts.credential_expiry",
            "marts.drift_disagreements",
            "marts.fleet_access",
            "marts.headlines",
        ),
        nonempty="marts.fleet_compliance",
    )
    common.banner(wh)
    return (wh,)


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    # how old each family of tables is, and what keeps it back (as `status` prints it)
    common.freshness_block()
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    _groups = common.query(
        "select distinct group_path from marts.fleet_compliance "
        "where group_path is not null order by 1"
    )["group_path"].to_list()
    _platforms = common.query(
        "select distinct platform from marts.fleet_compliance where platform is not null order by 1"
    )["platform"].to_list()
    group = common.dropdown(_groups, "Group (and its subgroups)")
    platform = common.dropdown(_platforms, "Platform")
    mo.hstack([group, platform], justify="start", gap=2)
    return group, platform


@app.cell
def _(common, group, platform):
    where, params = common.where({"group:group_path": group.value, "platform": platform.value})
    return params, where


@app.cell
def _(common, mo, params, pl, where):
    devices = common.query(
        f"""
        select
            device_id, device_name, platform, group_path, last_seen_at, last_seen_bucket,
            is_os_current, is_security_patch_current, is_blueprint_in_sync, has_required_apps,
            is_agent_current, verdict, reasons
        from marts.fleet_compliance
        where {where}
        """,
        params,
    ).with_columns(pl.col("group_path").fill_null(common.NO_GROUP))
    # The whole fleet's numbers, from their one home (marts.headlines): the filters above choose
    # what the charts and tables below show, never these.
    _h = common.headlines()

    def _number(name):
        return common.headline_value(_h.get(name))

    # the oldest check-in still judged: the last bucket that counts as seen (the admin's seed)
    _judged = common.hours(
        max(
            (b["max_hours"] for b in common.last_seen_buckets() if b["is_counted_as_seen"]),
            default=0,
        )
    )

    def _label(name):
        # what the number counts, in the mart's words (the only place they are written)
        return common.label_parts(_h[name]["label"])[0] if name in _h else name

    def _share(name):
        # out of what, in the mart's words: "45.3% of 1,880 devices in service"
        row = _h.get(name)
        return (
            f"{row['share']:.1%} of {row['denominator']:,} {common.label_parts(row['label'])[1]}"
            if row and row["share"] is not None
            else None
        )

    mo.vstack(
        [
            mo.hstack(
                [
                    mo.stat(_number("devices"), label=_label("devices"), caption="whole fleet"),
                    mo.stat(
                        _number("compliance_rate"),
                        label=_label("compliance_rate"),
                        caption=common.aged(_h.get("compliance_rate"), _share("compliance_rate")),
                    ),
                    mo.stat(
                        _number("non_compliant_devices"),
                        label=_label("non_compliant_devices"),
                        caption=_share("non_compliant_devices"),
                    ),
                    mo.stat(
                        _number("unverified_devices"),
                        label=_label("unverified_devices"),
                        caption=f"not seen for more than {_judged}, or a value unknown",
                    ),
                    mo.stat(
                        _number("not_seen_devices"),
                        label=_label("not_seen_devices"),
                        caption="or never checked in",
                    ),
                    mo.stat(
                        _number("low_battery_devices"),
                        label=_label("low_battery_devices"),
                        caption=_share("low_battery_devices"),
                    ),
                ],
                widths="equal",
            ),
            mo.md(
                "_The whole fleet (`marts.headlines`); the group and platform filters apply to "
                "the charts and tables below._"
            ),
        ]
    )
    return (devices,)


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    # The last night's changes as `status`, `changes` and the report's index say them: counted
    # once (pipelines/views/digest.py reads marts.fleet_changes), in the words of
    # sql/vocabulary/change_kinds.csv; the whole fleet, no group or platform filter applies.
    common.changes_block()
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok or common.changes_digest() is None)
    nights = mo.ui.dropdown(
        options={"last night": 1, "last 7 nights": 7, "last 30 nights": 30, "every night": 0},
        value="last 7 nights",
        label="Changes of the",
    )
    nights
    return (nights,)


@app.cell
def _(common, mo, nights):
    _digest, _ = common.changes_digest(nights.value)
    _rows = common.change_rows(nights.value)
    _since = f"{_digest.since:%Y-%m-%d %H:%M} UTC" if _digest.since else "–"
    mo.vstack(
        [
            mo.md(
                f"**{_digest.total:,} changes** over the {_digest.nights:,} "
                f"night{'s' if _digest.nights != 1 else ''} compared "
                f"since {_since}, night by night (`marts.fleet_changes`; a family held back "
                "says why):"
            ),
            common.table(_rows, "fleet_changes", page_size=15),
        ]
    ) if _rows.height else common.nothing("No change recorded over these nights.")
    return


@app.cell
def _(mo):
    mo.md("""## Fleet size""")
    return


@app.cell
def _(alt, common, devices, mo, pl):
    _by_platform = devices.group_by("platform").agg(pl.len().alias("devices"))
    _by_group, _group_title = common.top(
        devices.group_by("group_path")
        .agg(pl.len().alias("devices"))
        .sort(["devices", "group_path"], descending=[True, False], nulls_last=True),
        "Devices by group, largest first",
        "every group: the table below",
    )
    _platform = (
        alt.Chart(_by_platform, title="Devices by platform")
        .mark_bar()
        .encode(
            x=alt.X("devices:Q", title="Devices"),
            y=alt.Y("platform:N", title=None, sort="-x"),
            color=alt.Color("platform:N", legend=None),
            tooltip=["platform", "devices"],
        )
        .properties(width=260, height=alt.Step(28))
    )
    _group = (
        alt.Chart(_by_group, title=_group_title)
        .mark_bar(color="#2f6fb0")
        .encode(
            x=alt.X("devices:Q", title="Devices"),
            y=alt.Y("group_path:N", title=None, sort="-x"),
            tooltip=["group_path", "devices"],
        )
        .properties(width=320, height=alt.Step(20))
    )
    fleet_size_chart = alt.hconcat(_platform, _group)
    fleet_size_chart if devices.height else mo.md("No device matches.")
    return (fleet_size_chart,)


@app.cell
def _(common, devices, mo, pl):
    _groups = (
        devices.group_by("group_path")
        .agg(pl.len().alias("devices"))
        .sort(["devices", "group_path"], descending=[True, False], nulls_last=True)
    )
    mo.accordion(
        {f"Every group ({_groups.height:,})": common.table(_groups, "groups", page_size=15)}
    ) if devices.height else None
    return


@app.cell
def _(mo):
    mo.md(
        """
        ## Compliance now

        A device is **compliant** when it passes every check: OS at or above the platform target,
        security patch recent enough, its blueprint applied and current, required apps at their
        target version, and a current agent. Targets live in `sql/seeds/`.
        """
    )
    return


@app.cell
def _(alt, common, devices, pl):
    # Shares of the devices in service, as the headline's (marts.headlines compliance_rate):
    # out-of-service devices are in no rate, so in no bar; the subtitle counts them.
    _rate = common.headlines()["compliance_rate"]
    _in_service = [v for v in common.VERDICTS if v != "out_of_service"]
    _counts = (
        devices.filter(pl.col("verdict").is_in(_in_service))
        .group_by("platform", "verdict")
        .agg(pl.len().alias("devices"))
    )
    _out = devices.filter(pl.col("verdict") == "out_of_service").height
    verdict_chart = (
        alt.Chart(
            _counts,
            title=alt.Title(
                "Verdict by platform",
                subtitle=f"Share of {common.label_parts(_rate['label'])[1]}, as the headline; "
                f"{_out:,} out of service are in no share",
            ),
        )
        .mark_bar()
        .encode(
            x=alt.X(
                "devices:Q",
                stack="normalize",
                title=f"Share of {common.label_parts(_rate['label'])[1]}",
                axis=alt.Axis(format="%"),
            ),
            y=alt.Y("platform:N", title=None),
            color=common.verdict_color(verdicts=_in_service),
            order=alt.Order("verdict_order:Q"),
            tooltip=["platform", "verdict", "devices"],
        )
        .transform_calculate(verdict_order=f"indexof({_in_service}, datum.verdict)")
        .properties(width=560, height=alt.Step(34))
    )
    verdict_chart
    return (verdict_chart,)


@app.cell
def _(mo):
    mo.md("""## Compliance day by day""")
    return


@app.cell
def _(alt, common, mo, params, where):
    daily = common.query(
        f"""
        select
            day,
            sum(compliant_devices)::bigint as compliant,
            sum(non_compliant_devices)::bigint as non_compliant,
            sum(unverified_devices)::bigint as unverified,
            sum(out_of_service_devices)::bigint as out_of_service,
            sum(compliant_devices)::double / nullif(sum(devices), 0) as compliance_rate
        from marts.fleet_compliance_daily
        where {where}
        group by day
        order by day
        """,
        params,
    )
    _long = daily.unpivot(
        index="day",
        on=["compliant", "non_compliant", "unverified", "out_of_service"],
        variable_name="verdict",
        value_name="devices",
    )
    _rate = (
        alt.Chart(daily, title="Compliance rate (compliant ÷ devices in service)")
        .mark_line(point=True, color="#2e8540")
        .encode(
            x=alt.X("day:T", title=None, axis=alt.Axis(format="%b %d", tickCount="day")),
            y=alt.Y(
                "compliance_rate:Q",
                title="Compliant",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=[alt.Tooltip("day:T"), alt.Tooltip("compliance_rate:Q", format=".1%")],
        )
        .properties(width=560, height=180)
    )
    _stack = (
        alt.Chart(_long, title="Devices by verdict")
        .mark_area()
        .encode(
            x=alt.X("day:T", title=None, axis=alt.Axis(format="%b %d", tickCount="day")),
            y=alt.Y("devices:Q", title="Devices", stack=True),
            color=common.verdict_color(),
            order=alt.Order("verdict_order:Q"),
            tooltip=["day:T", "verdict", "devices"],
        )
        .transform_calculate(
            verdict_order="indexof(['compliant', 'non_compliant', 'unverified', 'out_of_service'], datum.verdict)"
        )
        .properties(width=560, height=200)
    )
    # Each legend above the chart it explains (a shared one sits above the first chart).
    trend_chart = alt.vconcat(_rate, _stack).resolve_legend(color="independent")
    trend_chart if daily.height else common.nothing("No daily history for this selection yet.")
    return daily, trend_chart


@app.cell
def _(mo):
    mo.md("""## Why devices are non-compliant""")
    return


@app.cell
def _(alt, common, mo, params, where):
    # Counted by reason code with the vocabulary's label (sql/vocabulary/reason_codes.csv, through
    # marts.compliance_reasons), as marts.headlines' top_reasons counts them for the whole fleet.
    _reasons = common.query(
        f"""
        select reason_code, any_value(reason_label) as reason,
            count(distinct device_id) as devices
        from marts.compliance_reasons
        where verdict = 'non_compliant' and reason_kind = 'fail' and {where}
        group by reason_code
        order by devices desc, min(reason_position), reason_code
        """,
        params,
    )
    reasons_chart = (
        alt.Chart(
            _reasons, title="Why devices are non-compliant (a device can fail several checks)"
        )
        .mark_bar(color="#d83933")
        .encode(
            x=alt.X("devices:Q", title="Non-compliant devices"),
            y=alt.Y("reason:N", title=None, sort="-x", axis=alt.Axis(labelLimit=320)),
            tooltip=["reason", "reason_code", "devices"],
        )
        .properties(width=480, height=alt.Step(26))
    )
    reasons_chart if _reasons.height else mo.md("No non-compliant device in this selection.")
    return (reasons_chart,)


@app.cell
def _(common, devices, mo, pl):
    _non = devices.filter(pl.col("verdict") == "non_compliant").with_columns(
        pl.col("reasons").list.join(", ")
    )
    mo.accordion(
        {
            f"Non-compliant devices ({_non.height:,})": common.table(
                _non.select("device_name", "platform", "group_path", "reasons", "last_seen_at"),
                "non_compliant_devices",
                page_size=15,
            )
        }
    )
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    # the boundaries as the admin's seed sets them (sql/seeds/last_seen_buckets.csv)
    _bounds = []
    _after = None
    for _bucket in common.last_seen_buckets():
        if _bucket["max_hours"] is not None:
            _bounds.append(
                f"**{_bucket['last_seen_bucket']}** ≤ {common.hours(_bucket['max_hours'])}"
            )
            _after = _bucket["max_hours"]
        else:
            _beyond = f"more than {common.hours(_after)}" if _after is not None else "any time"
            _bounds.append(f"**{_bucket['last_seen_bucket']}** {_beyond}")
    mo.md(
        "## Stale and missing devices\n\n"
        f"Last seen (`last_seen_buckets.csv`): {', '.join(_bounds)}, **never_seen** never "
        "checked in."
    )
    return


@app.cell
def _(alt, common, devices, pl):
    # One bar per bucket, its platforms stacked on one another: the bar's top is the bucket's
    # total, what a reader reads off it.
    _buckets = devices.group_by("last_seen_bucket", "platform").agg(pl.len().alias("devices"))
    last_seen_chart = (
        alt.Chart(_buckets, title="Devices by last check-in")
        .mark_bar()
        .encode(
            x=alt.X(
                "last_seen_bucket:N", title=None, sort=common.BUCKETS, axis=alt.Axis(labelAngle=0)
            ),
            y=alt.Y("devices:Q", title="Devices", stack="zero"),
            color=alt.Color("platform:N", title="Platform"),
            order=alt.Order("platform:N"),
            tooltip=["last_seen_bucket", "platform", "devices"],
        )
        .properties(width=420, height=220)
    )
    last_seen_chart
    return (last_seen_chart,)


@app.cell
def _(common, mo, params, where):
    stale = common.query(
        f"""
        select device_name, platform, group_path, last_seen_bucket, days_since_seen,
            last_seen_at, verdict
        from marts.stale_devices
        where {where}
        order by last_seen_at nulls first, device_name
        """,
        params,
    )
    _unseen = common.headlines()["not_seen_devices"]  # the whole fleet: marts.headlines
    _selected = f"; {stale.height:,} in this selection" if params else ""
    mo.vstack(
        [
            mo.md(f"**{_unseen['label']}: {_unseen['value']:,} devices**{_selected}:"),
            common.table(stale, "stale_devices", page_size=15),
        ]
    ) if stale.height else common.nothing("Every device in this selection checked in today.")
    return (stale,)


@app.cell
def _(mo):
    mo.md(
        """
        ## What stops working soon

        Apple push certificates, enrolment (DEP) and app licence (VPP) tokens, and provisioning
        profiles that have expired or expire within their kind's warning days (`sql/vocabulary/credential_kinds.csv`,
        30 by default), soonest first. The whole fleet: no group or platform filter applies.
        """
    )
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    credentials = common.query(
        """
        select status, credential_kind, credential_name, expires_at, days_left, stops_when_expired
        from marts.credential_expiry
        where status in ('expired', 'expiring', 'unreadable')
        order by expires_at nulls last
        """
    )
    _unknown = common.scalar(
        "select count(*) from marts.credential_expiry where status = 'unknown'"
    )
    _unknown_note = mo.md(
        f"{_unknown:,} more (app licence tokens, or a date the API did not give) have no expiry "
        "the warehouse can read: check them in Apple Business Manager."
    )
    _needing = common.headlines()["credentials_needing_action"]  # marts.headlines
    _age = f" ({common.aged(_needing, None, markdown=True)})" if _needing["age_note"] else ""
    mo.stop(not _needing["is_known"], common.age_callout(_needing))
    mo.vstack(
        [
            mo.md(f"**{_needing['value']:,} credentials** have expired or expire soon{_age}:")
            if credentials.height
            else common.nothing("No credential expires within its warning days."),
            *(
                [common.table(credentials, "credentials", page_size=10)]
                if credentials.height
                else []
            ),
            *([_unknown_note] if _unknown else []),
        ]
    )
    return (credentials,)


@app.cell
def _(mo):
    mo.md(
        """
        ## Where Esper and the warehouse disagree on drift

        Esper reports its own drift verdict per device; the warehouse checks blueprint ids and
        versions itself (`is_blueprint_in_sync`). **esper_only**: Esper sees a drift the
        blueprint ids do not show (in the device's settings). **ours_only**: the blueprint is
        not the assigned one, its version is behind or its upgrade failed, while Esper says in
        sync. **esper_code_unknown**: a drift code `sql/vocabulary/drift_states.csv` does not
        know. Esper's codes are undocumented: the vocabulary is the project's reading.
        """
    )
    return


@app.cell
def _(common, mo, params, pl, where):
    drift = common.query(
        f"""
        select disagreement, device_name, platform, group_path, esper_drift_state_name,
            esper_drift_severity, blueprint_upgrade_status, blueprint_reasons
        from marts.drift_disagreements
        where {where}
        order by disagreement, group_path, device_name
        """,
        params,
    ).with_columns(pl.col("blueprint_reasons").list.join("; "))  # none: an empty cell, not []
    # the whole fleet's counts (marts.headlines), then this selection's rows
    _h = common.headlines()
    _counts = ", ".join(
        f"{row['value']:,} {common.text(row['item'])}"
        for key, row in _h.items()
        if key.startswith("drift_disagreements/")
    )
    _total = _h["drift_disagreements"]
    mo.stop(not _total["is_known"], common.age_callout(_total))
    _selected = f"; {drift.height:,} in this selection" if params else ""
    _age = f" ({common.aged(_total, None, markdown=True)})" if _total["age_note"] else ""
    mo.vstack(
        [
            mo.md(
                f"**{_total['value']:,} devices** where the two verdicts differ ({_counts})"
                f"{_selected}{_age}:"
            ),
            common.table(drift, "drift_disagreements", page_size=10),
        ]
    ) if drift.height else common.nothing("Esper and the warehouse agree on every device here.")
    return (drift,)


@app.cell
def _(common, mo, params, where, wh):
    # Esper's security verdict beside the warehouse's patch check (marts.security_disagreements);
    # the whole fleet's counts from marts.headlines, then this selection's rows
    mo.stop(not wh.has("marts.security_disagreements"))
    security = common.query(
        f"""
        select disagreement, device_name, platform, group_path, esper_security_state,
            esper_reason, verdict, our_reason
        from marts.security_disagreements
        where {where}
        order by disagreement, group_path, device_name
        """,
        params,
    )
    _h = common.headlines()
    _counts = ", ".join(
        f"{row['value']:,} {common.text(row['item'])}"
        for key, row in _h.items()
        if key.startswith("security_disagreements/")
    )
    mo.stop(
        not _h["security_disagreements"]["is_known"],
        common.age_callout(_h["security_disagreements"]),
    )
    _total = _h["security_disagreements"]["value"]
    _selected = f"; {security.height:,} in this selection" if params else ""
    mo.vstack(
        [
            mo.md(
                "## Where Esper and the warehouse disagree on security\n\n"
                "Esper rates Android devices from Google's integrity checks and the patch age "
                "(`sql/vocabulary/security_states.csv`); the warehouse checks the patch age "
                "against your target. **esper_only**: Esper rates the device at risk while the "
                "patch check passes. **ours_only**: Esper says secure while the patch check "
                f"fails.\n\n**{_total:,} devices** where the two verdicts differ "
                f"({_counts}){_selected}:"
            ),
            common.table(security, "security_disagreements", page_size=10),
        ]
    ) if security.height else common.nothing(
        "Esper and the warehouse agree on every device's security here."
    )
    return (security,)


@app.cell
def _(mo):
    mo.md(
        """
        ## Who may act on the fleet

        Every user, with the role their scopes come from and the destructive commands those
        scopes allow (`sql/vocabulary/destructive_commands.csv`). A blank verdict means the
        role's scopes could not be read (no role matched, or the key may not read roles): it is
        never guessed from the role's name. The whole tenant: no group or platform filter applies.
        """
    )
    return


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    access = common.query(
        """
        select name, email, is_active, last_login, role_name, can_wipe, can_reboot, can_lock,
            destructive_commands, has_all_group_access, group_count
        from marts.fleet_access
        order by can_wipe desc nulls first, can_reboot desc nulls first, name
        """
    )
    _h = common.headlines()  # active users, as `status` and the demo count them
    _wipe, _unknown = _h["users_may_wipe"], _h["users_scopes_unknown"]["value"]
    mo.stop(not _wipe["is_known"], common.age_callout(_wipe))
    _age = f" ({common.aged(_wipe, None, markdown=True)})" if _wipe["age_note"] else ""
    mo.vstack(
        [
            mo.md(
                f"**{_wipe['value']:,} of {_wipe['denominator']:,} active users** may wipe devices"
                + (f"; the scopes of {_unknown:,} could not be read" if _unknown else "")
                + f"{_age}."
            ),
            common.table(access, "fleet_access", page_size=10),
        ]
    ) if access.height else common.nothing(
        "No user was loaded (the key may not read users: `esper-warehouse status`)."
    )
    return (access,)


if __name__ == "__main__":
    app.run()
