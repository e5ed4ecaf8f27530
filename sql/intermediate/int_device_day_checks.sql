-- materialized: table
-- Compliance of each device on each day of the spine (int_device_days), judged at cutoff_at
-- against the seeds. One place for the rules: fleet_compliance (the as_of day) and
-- fleet_compliance_daily (every day) both read this model.
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
--                    >= its min_version; unknown when the device never reported its app inventory
--   agent_check      Esper agent version >= platform min_agent_version
-- last_seen_bucket: never_seen, or online/active/stale/offline/missing by the hours from
--   last_seen_at to cutoff_at and the thresholds of seeds.last_seen_buckets.
-- verdict: unverified when the bucket does not count as seen (never_seen, offline, missing by
--   default) -- whatever the checks say; else non_compliant when any check fails; else unverified
--   when any check is unknown; else compliant.
with

device_days as (
    select * from intermediate.int_device_days
),

devices as (
    select * from intermediate.int_devices_current
),

targets as (
    select * from staging.stg_seeds__platform_targets
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
    from buckets
),

blueprint_versions as (
    select * from intermediate.int_blueprint_versions
),

required_app_rows as (
    -- installs of required apps as UTC day ranges: installed at the end of day d (cutoff_at) when
    -- valid_from <= cutoff_at < valid_to, i.e. from_day <= d <= to_day
    select
        device_id,
        package_name,
        version_key,
        utc_date(valid_from) as from_day,
        coalesce(utc_date(valid_to) - 1, date '9999-12-31') as to_day,
    from intermediate.int_device_app_versions
    where package_name in (select package_name from required_apps)
),

device_required as (
    select
        device_days.device_id as device_id,
        device_days.day as day,
        required_apps.package_name as package_name,
        required_apps.min_version_key as min_version_key,
    from device_days
    inner join required_apps
        on required_apps.platform = device_days.platform
),

required_per_day as (
    select
        device_required.device_id as device_id,
        device_required.day as day,
        device_required.package_name as package_name,
        any_value(device_required.min_version_key) as min_version_key,
        max(required_app_rows.version_key) as installed_version_key,
        count(required_app_rows.device_id) > 0 as is_installed,
    from device_required
    left join required_app_rows
        on required_app_rows.device_id = device_required.device_id
        and required_app_rows.package_name = device_required.package_name
        and device_required.day between required_app_rows.from_day and required_app_rows.to_day
    group by device_required.device_id, device_required.day, device_required.package_name
),

required_summary as (
    select
        device_id,
        day,
        count(*) as required_app_count,
        count(*) filter (where not is_installed) as missing_app_count,
        count(*) filter (
            where is_installed
                and (installed_version_key is null or installed_version_key < min_version_key)
        ) as outdated_app_count,
    from required_per_day
    group by device_id, day
),

blueprint_days as (
    -- the latest published version of each blueprint at each day's cutoff (few rows)
    select
        day_cutoffs.day as day,
        blueprint_versions.blueprint_id as blueprint_id,
        blueprint_versions.blueprint_version_id as latest_blueprint_version_id,
    from (select distinct day, cutoff_at from device_days) as day_cutoffs
    inner join (select distinct blueprint_id from blueprint_versions) as blueprint_ids
        on true
    asof join blueprint_versions
        on blueprint_versions.blueprint_id = blueprint_ids.blueprint_id
        and blueprint_versions.published_at <= day_cutoffs.cutoff_at
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
        devices.first_apps_reported_at as first_apps_reported_at,
        targets.min_os_version_key as min_os_version_key,
        targets.max_security_patch_age_days as max_security_patch_age_days,
        targets.min_agent_version_key as min_agent_version_key,
        epoch(with_blueprint.cutoff_at - with_blueprint.last_seen_at) / 3600.0 as hours_since_seen,
        utc_date(with_blueprint.cutoff_at) - with_blueprint.security_patch_level as security_patch_age_days,
        with_blueprint.assigned_blueprint_id is distinct from with_blueprint.current_blueprint_id
            as is_blueprint_assignment_drift,
        with_blueprint.latest_blueprint_version_id is not null
            and with_blueprint.current_blueprint_version_id
                is distinct from with_blueprint.latest_blueprint_version_id
            as is_blueprint_version_behind,
        coalesce(with_blueprint.blueprint_upgrade_status = 'UPGRADE_FAILED', false)
            as is_blueprint_upgrade_failed,
        required_summary.required_app_count as required_app_count,
        required_summary.missing_app_count as missing_app_count,
        required_summary.outdated_app_count as outdated_app_count,
        bucket_bounds.*,
    from with_blueprint
    cross join bucket_bounds
    left join devices
        on devices.device_id = with_blueprint.device_id
    left join targets
        on targets.platform = with_blueprint.platform
    left join required_summary
        on required_summary.device_id = with_blueprint.device_id
        and required_summary.day = with_blueprint.day
),

checked as (
    select
        measured.* exclude (online_max_hours, active_max_hours, stale_max_hours, offline_max_hours),
        case
            when last_seen_at is null then 'never_seen'
            when hours_since_seen <= online_max_hours then 'online'
            when hours_since_seen <= active_max_hours then 'active'
            when hours_since_seen <= stale_max_hours then 'stale'
            when hours_since_seen <= offline_max_hours then 'offline'
            else 'missing'
        end as last_seen_bucket,
        case
            when min_os_version_key is null then 'not_applicable'
            when os_version_key is null then 'unknown'
            when os_version_key >= min_os_version_key then 'pass'
            else 'fail'
        end as os_check,
        case
            when max_security_patch_age_days is null then 'not_applicable'
            when security_patch_level is null then 'unknown'
            when security_patch_age_days <= max_security_patch_age_days then 'pass'
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
        case
            when min_agent_version_key is null then 'not_applicable'
            when agent_version_key is null then 'unknown'
            when agent_version_key >= min_agent_version_key then 'pass'
            else 'fail'
        end as agent_check,
    from measured
),

judged as (
    select
        checked.*,
        coalesce(buckets.is_counted_as_seen, false) as is_seen_recently,
        case
            when not coalesce(buckets.is_counted_as_seen, false) then 'unverified'
            when 'fail' in (os_check, patch_check, blueprint_check, apps_check, agent_check)
                then 'non_compliant'
            when 'unknown' in (os_check, patch_check, blueprint_check, apps_check, agent_check)
                then 'unverified'
            else 'compliant'
        end as verdict,
    from checked
    left join buckets
        on buckets.last_seen_bucket = checked.last_seen_bucket
)

select * from judged
