-- materialized: table
-- headlines: described, with every column, in sql/marts/_marts.yml.
with

as_of as (
    select as_of from intermediate.int_as_of
),

compliance as (
    select * from marts.fleet_compliance
),

fleet as (
    select
        count(*) as devices,
        count(*) filter (where is_in_service) as in_service,
        count(*) filter (where verdict = 'compliant') as compliant,
        count(*) filter (where verdict = 'non_compliant') as non_compliant,
        count(*) filter (where verdict = 'unverified') as unverified,
        count(*) filter (where verdict = 'out_of_service') as out_of_service,
    from compliance
),

-- the last reported battery of each current device (the device list's battery_stats)
battery as (
    select
        count(devices.battery_level_pct) as reporting,
        count(*) filter (where devices.battery_level_pct < low_battery_below_pct()) as low,
    from compliance
    inner join staging.stg_esper__devices as devices
        on devices.device_id = compliance.device_id
),

esper_counters as (
    select low_battery_devices
    from staging.stg_esper__status_metrics
    order by snapshot_date desc
    limit 1
),

-- "not seen" is every bucket after online and active (marts.stale_devices): more than their
-- max_hours since the last check-in (an aggregate: one row, 0 h when the seed has neither)
not_seen_after as (
    select coalesce(max(max_hours), 0) as max_hours
    from staging.stg_seeds__last_seen_buckets
    where last_seen_bucket in ('online', 'active')
),

buckets as (
    select
        last_seen_bucket,
        row_number() over (order by max_hours nulls last) as bucket_rank,
    from staging.stg_seeds__last_seen_buckets
    union all
    select 'never_seen', 1000  -- not a seed bucket: no check-in at all, listed last
),

reasons as (
    select * from marts.compliance_reasons
    where verdict = 'non_compliant' and reason_kind = 'fail'
),

access as (
    select * from marts.fleet_access
    where coalesce(is_active, true)
),

-- Esper Pipelines runs not yet ended, and whether each is stalled or failing (the flags' home is
-- marts.pipeline_rollout)
open_pipeline_runs as (
    select
        pipeline_run_id,
        any_value(run_status) as run_status,
        bool_or(is_stalled) as is_stalled,
        bool_or(is_failing) as is_failing,
    from marts.pipeline_rollout
    where is_run_open
    group by pipeline_run_id
),

pipeline_run_stages as (
    -- the stage each open run is held at, by flag: the stage a waiting run waits to start, the
    -- stage a stalled run is at, the failing stage (minutes at the time the Pipelines tables are
    -- as of, the mart's data_as_of)
    select
        rollout.*,
        rollout.pipeline_name || ' run ' || rollout.run_number || ', stage '
            || rollout.stage_order || ' ' || rollout.stage_name as run_stage_label,
        floor(epoch(rollout.data_as_of - rollout.waiting_for_approval_since) / 60)
            as minutes_waiting,
        floor(epoch(rollout.data_as_of - rollout.last_change_at) / 60) as minutes_unchanged,
    from marts.pipeline_rollout as rollout
    where rollout.is_run_open
),

pipeline_runs_open as (
    select
        count(*) as open_runs,
        count(*) filter (where run_status = 'waiting') as waiting,
        count(*) filter (where is_stalled) as stalled,
        count(*) filter (where is_failing) as failing,
    from open_pipeline_runs
),

-- the app version rollouts in progress (marts.app_version_rollout), the slowest first
slowest_app_rollout as (
    select *
    from marts.app_version_rollout
    where is_latest_version
        and days_to_90_pct is null
        and first_seen_at >= as_of - to_days(app_rollout_current_days())
    order by first_seen_at, share_at_or_above, platform, package_name
    limit 1
),

scalars as (
    select
        'devices' as headline, fleet.devices as value, null as denominator,
        'devices' as unit, 'Devices' as label,
        'marts.fleet_compliance' as source,
        'current devices: enrolled and not removed, in or out of service' as definition,
    from fleet
    union all
    select
        'compliance_rate', fleet.compliant, fleet.in_service, 'devices',
        'Compliant (of devices in service)',
        'marts.fleet_compliance.verdict',
        'devices whose verdict is compliant (every check passes, seen within 7 days) out of the '
            || 'devices in service (disabled, provisioning, being wiped or onboarding devices are '
            || 'in no rate; unverified ones count against it)',
    from fleet
    union all
    select
        'non_compliant_devices', fleet.non_compliant, fleet.in_service, 'devices',
        'Non-compliant (of devices in service)',
        'marts.fleet_compliance.verdict',
        'devices in service that fail at least one check',
    from fleet
    union all
    select
        'unverified_devices', fleet.unverified, fleet.in_service, 'devices',
        'Unverified (of devices in service)',
        'marts.fleet_compliance.verdict',
        'devices in service not seen within 7 days, or with a value a check needs not reported: '
            || 'never counted compliant',
    from fleet
    union all
    select
        'out_of_service_devices', fleet.out_of_service, fleet.devices, 'devices',
        'Out of service (of all devices)',
        'marts.fleet_compliance.is_in_service',
        'devices disabled, provisioning, being wiped, onboarding or applying their blueprint: '
            || 'listed, in no compliance rate',
    from fleet
    union all
    select
        'not_seen_devices', (select count(*) from marts.stale_devices), fleet.devices, 'devices',
        'Not seen for more than ' || as_label(not_seen_after.max_hours) || ' h (or never)',
        'marts.stale_devices',
        'current devices whose last check-in is more than ' || as_label(not_seen_after.max_hours)
            || ' hours old (stale, offline, missing) or that never checked in',
    from fleet
    cross join not_seen_after
    union all
    select
        'low_battery_devices', battery.low, battery.reporting, 'devices',
        'Battery below ' || as_label(low_battery_below_pct())
            || ' % (of devices reporting a battery)',
        'staging.stg_esper__devices.battery_level_pct',
        'current devices whose last reported battery level (the device list''s battery_stats) is '
            || 'below ' || as_label(low_battery_below_pct()) || ' %, out of the current devices '
            || 'that report a battery',
    from battery
    union all
    select
        'esper_low_battery_devices', esper_counters.low_battery_devices, null, 'devices',
        'Low battery, as Esper''s console counts it',
        'staging.stg_esper__status_metrics.low_battery_devices',
        'Esper''s own counter, read as served on the latest day: its definition is Esper''s '
            || '(unpublished), measured when the run read it; not the headline low_battery_devices',
    from (select 1) left join esper_counters on true
    union all
    select
        'credentials_needing_action',
        count(*) filter (where status in ('expired', 'expiring', 'unreadable')),
        count(*), 'credentials',
        'Credentials expired, expiring or unreadable',
        'marts.credential_expiry.status',
        'Apple push certificates, enrolment tokens and provisioning profiles expired, expiring '
            || 'within their kind''s warning days, or whose expiry cannot be read',
    from marts.credential_expiry
    union all
    select
        'drift_disagreements', (select count(*) from marts.drift_disagreements), fleet.devices,
        'devices', 'Devices whose drift verdicts differ',
        'marts.drift_disagreements',
        'current devices that Esper''s drift verdict and the warehouse''s blueprint check judge '
            || 'differently (or whose Esper drift code is unknown)',
    from fleet
    union all
    select
        'security_disagreements', (select count(*) from marts.security_disagreements),
        fleet.devices, 'devices', 'Devices whose security verdicts differ',
        'marts.security_disagreements',
        'current devices that Esper rates at risk (security_state LOW_RISK, MEDIUM_RISK or '
            || 'HIGH_RISK) while they pass the warehouse''s security patch check, or rates SECURE '
            || 'while they fail it (or whose Esper security state is unknown)',
    from fleet
    union all
    select
        'slowest_app_rollout',
        coalesce(slowest.devices_at_or_above, 0), slowest.devices_with_app, 'devices',
        coalesce(
            'Slowest app rollout in progress: ' || coalesce(slowest.app_name, slowest.package_name)
                || ' ' || slowest.version_name || ' on ' || slowest.platform || ', first installed '
                || as_label(round(epoch(slowest.as_of - slowest.first_seen_at) / 86400.0, 1))
                || ' days ago (of devices with the app)',
            'No app rollout in progress'
        ),
        'marts.app_version_rollout',
        'of the app versions that are the latest of their app on their platform, first installed '
            || 'in the fleet within the last ' || as_label(app_rollout_current_days())
            || ' days and not yet on 90 % of the devices with the app (days_to_90_pct NULL), the '
            || 'one first installed longest ago (ties: the lower share, then platform, app): its '
            || 'devices on it or a higher version, out of the current devices with the app',
    from (select 1)
    left join slowest_app_rollout as slowest on true
    union all
    select
        'users_may_wipe', count(*) filter (where can_wipe), count(*), 'users',
        'Active users who may wipe devices',
        'marts.fleet_access.can_wipe',
        'active users (is_active true or not read) whose role''s scopes grant WIPE, out of the '
            || 'active users',
    from access
    union all
    select
        'users_may_wipe_reboot_or_lock',
        count(*) filter (where can_wipe or can_reboot or can_lock), count(*), 'users',
        'Active users who may wipe, reboot or lock devices',
        'marts.fleet_access',
        'active users whose role''s scopes grant WIPE, REBOOT or LOCK, out of the active users',
    from access
    union all
    select
        'users_scopes_unknown', count(*) filter (where not scopes_known), count(*), 'users',
        'Active users whose scopes are unknown',
        'marts.fleet_access.scopes_known',
        'active users whose role''s scopes could not be read whole: neither "may" nor "may not"',
    from access
    union all
    select
        'pipeline_runs_waiting', waiting, open_runs, 'pipeline runs',
        'Pipeline runs waiting for an approval (of runs not ended)',
        'marts.pipeline_rollout.waiting_for_approval_since',
        'Esper Pipelines runs held before a stage until someone approves it (status waiting), '
            || 'out of the runs not yet ended',
    from pipeline_runs_open
    union all
    select
        'pipeline_runs_stalled', stalled, open_runs, 'pipeline runs',
        'Pipeline runs stalled for more than ' || as_label(pipeline_stalled_after_hours())
            || ' h (of runs not ended)',
        'marts.pipeline_rollout.is_stalled',
        'Esper Pipelines runs not ended and not waiting for an approval whose last change '
            || '(the run, its stage runs or their target runs: last_change_at) is more than '
            || as_label(pipeline_stalled_after_hours()) || ' hours old, out of the runs not yet '
            || 'ended',
    from pipeline_runs_open
    union all
    select
        'pipeline_runs_failing', failing, open_runs, 'pipeline runs',
        'Pipeline runs failing on more than ' || as_label(100 * pipeline_failing_share())
            || ' % of a stage (of runs not ended)',
        'marts.pipeline_rollout.is_failing',
        'Esper Pipelines runs not ended whose current stage (the last reached) has more than '
            || as_label(100 * pipeline_failing_share()) || ' % of its target devices failed or '
            || 'timed out, out of the runs not yet ended',
    from pipeline_runs_open
),

items as (
    select
        'devices' as headline, platform as item,
        row_number() over (order by count(*) desc, platform) as item_rank,
        platform as label, count(*) as value, (select devices from fleet) as denominator,
        'devices' as unit,
        'marts.fleet_compliance.platform' as source,
        'current devices of each platform' as definition,
    from compliance
    group by platform
    union all
    select
        'not_seen_devices', stale.last_seen_bucket,
        row_number() over (order by any_value(buckets.bucket_rank)),
        stale.last_seen_bucket, count(*), (select devices from fleet), 'devices',
        'marts.stale_devices.last_seen_bucket',
        'the not-seen devices (not_seen_devices) by last-seen bucket',
    from marts.stale_devices as stale
    left join buckets
        on buckets.last_seen_bucket = stale.last_seen_bucket
    group by stale.last_seen_bucket
    union all
    select
        'top_reasons', reason_code,
        row_number() over (
            order by count(distinct device_id) desc, min(reason_position), reason_code
        ),
        any_value(reason_label), count(distinct device_id),
        (select non_compliant from fleet), 'devices',
        'marts.compliance_reasons.reason_code',
        'non-compliant devices failing a check, by reason code (a device can have several), '
            || 'out of the non-compliant devices',
    from reasons
    group by reason_code
    union all
    select
        'worst_command_rollouts', command_request_id, failing_rank,
        command, failure_devices + timeout_devices, target_devices, 'failed or timed-out devices',
        'marts.command_rollout.failing_rank',
        'the three command requests to ' || as_label(rollout_ranked_from_devices())
            || ' devices or more with the highest failure + timeout rate (ties: more targets, '
            || 'then the id), out of their target devices',
    from marts.command_rollout
    where failing_rank <= 3
    union all
    select
        'credentials_needing_action', status,
        case status when 'expired' then 1 when 'expiring' then 2 else 3 end,
        status, count(*), (select count(*) from marts.credential_expiry), 'credentials',
        'marts.credential_expiry.status',
        'credentials needing action, by status',
    from marts.credential_expiry
    where status in ('expired', 'expiring', 'unreadable')
    group by status
    union all
    select
        'drift_disagreements', disagreement,
        row_number() over (order by disagreement),
        disagreement, count(*), (select devices from fleet), 'devices',
        'marts.drift_disagreements.disagreement',
        'devices whose drift verdicts differ, by kind of disagreement',
    from marts.drift_disagreements
    group by disagreement
    union all
    select
        'security_disagreements', disagreement,
        row_number() over (order by disagreement),
        disagreement, count(*), (select devices from fleet), 'devices',
        'marts.security_disagreements.disagreement',
        'devices whose security verdicts differ, by kind of disagreement',
    from marts.security_disagreements
    group by disagreement
    union all
    select
        'pipeline_runs_waiting', pipeline_run_id,
        row_number() over (order by minutes_waiting desc, pipeline_run_id),
        run_stage_label, minutes_waiting, null, 'minutes',
        'marts.pipeline_rollout.waiting_for_approval_since',
        'each run waiting for an approval, at the stage it waits to start: the whole minutes it '
            || 'has waited',
    from pipeline_run_stages
    where waiting_for_approval_since is not null
    union all
    select
        'pipeline_runs_stalled', pipeline_run_id,
        row_number() over (order by minutes_unchanged desc, pipeline_run_id),
        run_stage_label, minutes_unchanged, null, 'minutes',
        'marts.pipeline_rollout.is_stalled',
        'each stalled run, at the stage it is at: the whole minutes since its last change '
            || '(last_change_at)',
    from pipeline_run_stages
    where is_stalled
    union all
    select
        'pipeline_runs_failing', pipeline_run_id,
        row_number() over (
            order by cast(failed_devices + timed_out_devices as double) / target_devices desc,
                pipeline_run_id
        ),
        run_stage_label, failed_devices + timed_out_devices, target_devices,
        'failed or timed-out devices',
        'marts.pipeline_rollout.is_failing',
        'each failing run, at its failing stage: its failed or timed-out devices, out of the '
            || 'target devices of that stage',
    from pipeline_run_stages
    where is_failing
),

-- the headlines drawn from compliance verdicts: as old as the families a verdict reads
verdict_headlines as (
    select
        headlines.headline,
        verdict.family,
    from (
        values
            ('compliance_rate'),
            ('non_compliant_devices'),
            ('unverified_devices'),
            ('top_reasons')
    ) as headlines (headline)
    cross join intermediate.int_verdict_families as verdict
),

-- the table families each headline reads (intermediate.int_family_freshness): its age
headline_families as (
    select * from verdict_headlines
    union all
    select * from (
        values
            ('devices', 'devices'),
            ('out_of_service_devices', 'devices'),
            ('not_seen_devices', 'devices'),
            ('low_battery_devices', 'devices'),
            ('esper_low_battery_devices', 'status_metrics'),
            ('credentials_needing_action', 'credentials'),
            ('drift_disagreements', 'devices'),
            ('drift_disagreements', 'catalogues'),
            ('security_disagreements', 'devices'),
            ('slowest_app_rollout', 'devices'),
            ('worst_command_rollouts', 'commands'),
            ('users_may_wipe', 'access'),
            ('users_may_wipe_reboot_or_lock', 'access'),
            ('users_scopes_unknown', 'access'),
            ('pipeline_runs_waiting', 'pipelines'),
            ('pipeline_runs_stalled', 'pipelines'),
            ('pipeline_runs_failing', 'pipelines')
    ) as pairs (headline, family)
),

ages as (
    select
        pairs.headline,
        case when bool_and(families.is_known) then min(families.data_as_of) end as data_as_of,
        bool_and(families.is_known) as is_known,
        string_agg(families.family_label || ': ' || families.age_note, '; '
            order by families.family) as age_note,
    from headline_families as pairs
    inner join intermediate.int_family_freshness as families
        on families.family = pairs.family
    group by pairs.headline
),

held_back as (
    select
        pairs.headline,
        string_agg(tables.table_name, ', ' order by tables.table_name) as held_back_by,
    from headline_families as pairs
    inner join intermediate.int_table_freshness as tables
        on tables.family = pairs.family
    where tables.freshness <> 'current'
    group by pairs.headline
),

-- Devices removed that the warehouse still counts. The device list's nightly read is incremental
-- (updated since the last), so only a complete scan (device_census) names a removal: until then a
-- removed device is current. Every run reads the API's device count as it opens (its first
-- request, no extra one); after the latest run that loaded the devices whole, the current devices
-- enrolled by then beyond that count are removals not yet named (docs/decisions.md, "Removals
-- between full scans")
device_count as (
    select runs.as_of, runs.api_device_count
    from staging.stg_esper__runs as runs
    inner join staging.stg_esper__run_tables as run_tables
        on run_tables.run_id = runs.run_id
    where runs.is_loaded
        and runs.as_of is not null
        and run_tables.table_name = 'devices'
        and run_tables.treatment = 'loaded'
    order by runs.as_of desc
    limit 1
),

removals as (
    select
        count(*) filter (
            where not devices.is_removed and coalesce(devices.created_at <= counted.as_of, true)
        ) - any_value(counted.api_device_count) as unseen,
        any_value(counted.api_device_count) as api_device_count,
        any_value(counted.as_of) as counted_at,
        (select max(census_at) from staging.stg_esper__device_census) as census_at,
    from device_count as counted
    cross join intermediate.int_devices_current as devices
    where counted.api_device_count is not null
),

removal_notes as (
    select distinct
        pairs.headline,
        'Devices: ' || removals.unseen || ' removed since '
            || coalesce(
                'the full scan of ' || strftime(timezone('UTC', removals.census_at), '%Y-%m-%d'),
                'the last full scan'
            )
            || ' still counted (the API counted ' || removals.api_device_count || ' at '
            || strftime(timezone('UTC', removals.counted_at), '%Y-%m-%d %H:%M')
            || ' UTC; the next full scan names them)' as note,
    from headline_families as pairs
    cross join removals
    where pairs.family = 'devices'
        and removals.unseen > 0
),

-- a headline that is only a list (top reasons, worst rollouts) gets a row of its own when it is
-- unknown, so that every surface can say so (its items are not listed then)
unknown_lists as (
    select
        ages.headline,
        null as item,
        null as item_rank,
        'unknown' as label,
        null as value,
        null as denominator,
        null as unit,
        null as source,
        'the list is unknown: a table family it reads was never loaded (age_note)' as definition,
    from ages
    anti join scalars
        on scalars.headline = ages.headline
    where not ages.is_known
),

numbers as (
    select headline, null as item, null as item_rank, label, value, denominator, unit,
        source, definition
    from scalars
    union all
    select * from unknown_lists
    union all
    select headline, item, item_rank, label, value, denominator, unit, source, definition
    from items
),

final as (
    select
        as_of.as_of as as_of,
        rows.headline as headline,
        rows.item as item,
        rows.item_rank as item_rank,
        rows.label as label,
        case when ages.is_known is not false then cast(rows.value as bigint) end as value,
        case when ages.is_known is not false then cast(rows.denominator as bigint) end as denominator,
        case
            when ages.is_known is not false
                then cast(rows.value as double) / nullif(rows.denominator, 0)
        end as share,
        rows.unit as unit,
        rows.source as source,
        rows.definition as definition,
        ages.data_as_of as data_as_of,
        ages.is_known as is_known,
        held_back.held_back_by as held_back_by,
        nullif(concat_ws('; ', ages.age_note, removal_notes.note), '') as age_note,
    from numbers as rows
    -- a headline missing from headline_families would have no age: a data test fails on it
    -- (sql/tests/headlines_have_an_age.sql), and the row is not lost meanwhile
    left join ages
        on ages.headline = rows.headline
    left join held_back
        on held_back.headline = rows.headline
    left join removal_notes
        on removal_notes.headline = rows.headline
    cross join as_of
    -- an item of a number that is unknown is not listed (its rows are older than anything known)
    where ages.is_known is not false or rows.item is null
)

select * from final
