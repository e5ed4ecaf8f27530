-- Compliance of each device on each day of the spine (int_device_days, with the attributes of
-- that day's version), judged at cutoff_at against the seeds. A view, like int_device_days.
-- One place for the rules: fleet_compliance (the as_of day) and fleet_compliance_daily (every
-- day) both read this model. fleet_compliance keeps the rows where is_as_of_day: DuckDB pushes
-- that filter down into int_device_days, which then builds the as_of day only.
--
-- Each *_check is one of:
--   pass            the device meets the target
--   fail            it does not
--   unknown         the target applies but the device has not reported the value
--   not_applicable  no target for the device's platform (empty seed cell / no required apps)
-- Checks:
--   os_check         os_version >= platform min_os_version (compared as versions)
--   patch_check      days from security_patch_level to the judged day <= max_security_patch_age_days
--   blueprint_check  drift = assigned_blueprint_id <> current_blueprint_id, or
--                    current_blueprint_version_id <> the assigned blueprint's latest published version
--                    at cutoff_at (when that version is known), or upgrade status UPGRADE_FAILED;
--                    not_applicable when the device has neither an assigned nor a current blueprint
--   apps_check       every required app of the platform installed (valid at cutoff_at) at a version
--                    >= its min_version (counts from int_device_days); unknown when the device
--                    never reported its app inventory
--   agent_check      Esper agent version >= platform min_agent_version
-- last_seen_bucket: never_seen, or online/active/stale/offline/missing by the hours from
--   last_seen_at to cutoff_at and the thresholds of seeds.last_seen_buckets.
-- verdict: out_of_service when the device's state does not count (disabled, provisioning, being
--   wiped or onboarding: is_in_service, sql/vocabulary/device_states.csv), whatever the checks
--   say; else unverified when the bucket does not count as seen (never_seen, offline, missing by
--   default); else non_compliant when any check fails; else unverified when any check is
--   unknown; else compliant.
with

as_of as (
    select * from intermediate.int_devices_as_of
),

device_days as (
    -- each device-day, with the attributes of the version it ended the day with
    select
        device_id,
        day,
        cutoff_at,
        is_as_of_day,
        platform,
        os_version,
        os_check,
        group_id,
        security_patch_level,
        agent_version,
        agent_check,
        has_security_patch_target,
        security_patch_deadline,
        assigned_blueprint_id,
        current_blueprint_id,
        current_blueprint_version_id,
        blueprint_upgrade_status,
        is_in_service,
        version_updated_at,
        last_seen_at,
        installed_required_app_count,
        current_required_app_count,
        first_apps_reported_at,
    from intermediate.int_device_days
),

required_apps as (
    select * from staging.stg_seeds__required_apps
),

buckets as (
    select * from staging.stg_seeds__last_seen_buckets
),

bucket_bounds as (
    select
        max(max_hours) filter (where last_seen_bucket = 'online') as online_max_hours,
        max(max_hours) filter (where last_seen_bucket = 'active') as active_max_hours,
        max(max_hours) filter (where last_seen_bucket = 'stale') as stale_max_hours,
        max(max_hours) filter (where last_seen_bucket = 'offline') as offline_max_hours,
        -- whether each bucket counts as seen (one row per bucket: sql/tests/grain.csv), carried
        -- on every row by the one-row cross join instead of a join per device-day
        coalesce(bool_or(is_counted_as_seen) filter (where last_seen_bucket = 'online'), false)
            as is_online_counted,
        coalesce(bool_or(is_counted_as_seen) filter (where last_seen_bucket = 'active'), false)
            as is_active_counted,
        coalesce(bool_or(is_counted_as_seen) filter (where last_seen_bucket = 'stale'), false)
            as is_stale_counted,
        coalesce(bool_or(is_counted_as_seen) filter (where last_seen_bucket = 'offline'), false)
            as is_offline_counted,
        coalesce(bool_or(is_counted_as_seen) filter (where last_seen_bucket = 'missing'), false)
            as is_missing_counted,
    from buckets
),

blueprint_versions as (
    select * from intermediate.int_blueprint_versions
),

required_counts as (
    select
        platform,
        count(*) as required_app_count,
    from required_apps
    group by platform
),

day_cutoffs as (
    -- every day of the spine (its cutoff as in int_device_days: day end, or as_of)
    select
        cast(unnest(generate_series(spine_start_date, as_of_date, interval 1 day)) as date) as day,
    from as_of
),

blueprint_ids as (
    select distinct blueprint_id
    from blueprint_versions
),

blueprint_days as (
    -- the latest published version of each blueprint at each day's cutoff (few rows)
    select
        day_cutoffs.day as day,
        blueprint_versions.blueprint_id as blueprint_id,
        blueprint_versions.blueprint_version_id as latest_blueprint_version_id,
    from day_cutoffs
    cross join as_of
    cross join blueprint_ids
    asof join blueprint_versions
        on blueprint_versions.blueprint_id = blueprint_ids.blueprint_id
        and blueprint_versions.published_at <= least(utc_day_end(day_cutoffs.day), as_of.as_of)
),

with_blueprint as (
    select
        device_days.*,
        blueprint_days.latest_blueprint_version_id as latest_blueprint_version_id,
    from device_days
    left join blueprint_days
        on blueprint_days.blueprint_id = device_days.assigned_blueprint_id
        and blueprint_days.day = device_days.day
),

measured as (
    select
        with_blueprint.*,
        -- elapsed hours from the microseconds since the epoch (no calendar arithmetic per row)
        (epoch_us(with_blueprint.cutoff_at) - epoch_us(with_blueprint.last_seen_at)) / 3600000000.0
            as hours_since_seen,
        with_blueprint.day - with_blueprint.security_patch_level as security_patch_age_days,
        with_blueprint.assigned_blueprint_id is distinct from with_blueprint.current_blueprint_id
            as is_blueprint_assignment_drift,
        with_blueprint.latest_blueprint_version_id is not null
            and with_blueprint.current_blueprint_version_id
                is distinct from with_blueprint.latest_blueprint_version_id
            as is_blueprint_version_behind,
        coalesce(with_blueprint.blueprint_upgrade_status = 'UPGRADE_FAILED', false)
            as is_blueprint_upgrade_failed,
        required_counts.required_app_count as required_app_count,
        required_counts.required_app_count - with_blueprint.installed_required_app_count
            as missing_app_count,
        with_blueprint.installed_required_app_count - with_blueprint.current_required_app_count
            as outdated_app_count,
        bucket_bounds.*,
    from with_blueprint
    cross join bucket_bounds
    left join required_counts
        on required_counts.platform = with_blueprint.platform
),

checked as (
    select
        measured.* exclude (
            online_max_hours, active_max_hours, stale_max_hours, offline_max_hours,
            is_online_counted, is_active_counted, is_stale_counted, is_offline_counted,
            is_missing_counted
        ),
        case
            when last_seen_at is null then 'never_seen'
            when hours_since_seen <= online_max_hours then 'online'
            when hours_since_seen <= active_max_hours then 'active'
            when hours_since_seen <= stale_max_hours then 'stale'
            when hours_since_seen <= offline_max_hours then 'offline'
            else 'missing'
        end as last_seen_bucket,
        -- the same cases: whether that bucket counts as seen (never_seen is no bucket: false)
        case
            when last_seen_at is null then false
            when hours_since_seen <= online_max_hours then is_online_counted
            when hours_since_seen <= active_max_hours then is_active_counted
            when hours_since_seen <= stale_max_hours then is_stale_counted
            when hours_since_seen <= offline_max_hours then is_offline_counted
            else is_missing_counted
        end as is_bucket_counted,
        case
            when not has_security_patch_target then 'not_applicable'
            when security_patch_level is null then 'unknown'
            when day <= security_patch_deadline then 'pass'
            else 'fail'
        end as patch_check,
        case
            when assigned_blueprint_id is null and current_blueprint_id is null then 'not_applicable'
            when is_blueprint_assignment_drift
                or is_blueprint_version_behind
                or is_blueprint_upgrade_failed then 'fail'
            else 'pass'
        end as blueprint_check,
        case
            when required_app_count is null then 'not_applicable'
            when first_apps_reported_at is null or first_apps_reported_at > cutoff_at then 'unknown'
            when missing_app_count + outdated_app_count > 0 then 'fail'
            else 'pass'
        end as apps_check,
    from measured
),

judged as (
    select
        checked.* exclude (is_bucket_counted),
        is_bucket_counted as is_seen_recently,
        case
            when not is_in_service then 'out_of_service'
            when not is_bucket_counted then 'unverified'
            when 'fail' in (os_check, patch_check, blueprint_check, apps_check, agent_check)
                then 'non_compliant'
            when 'unknown' in (os_check, patch_check, blueprint_check, apps_check, agent_check)
                then 'unverified'
            else 'compliant'
        end as verdict,
    from checked
)

select * from judged
