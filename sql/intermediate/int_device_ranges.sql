-- materialized: table
-- The days each device belonged to the fleet (int_device_spans), as ranges over which what
-- decides its compliance stays the same: one row per device and range of UTC days
-- [from_day, to_day] (within spine_start_date .. as_of_date) with one version and one set of
-- required installs. int_device_days expands them to one row per day; app_rollout counts the fleet
-- per day from them.
--   version_updated_at   the device's version those days: the latest with updated_at <= the end
--                        of the day (<= as_of on the as_of day). Its attributes live in
--                        int_device_versions: join on (device_id, updated_at = version_updated_at)
--   platform, group_id   of that version
--   version_last_seen_at the version's own last_seen (NULL on Android)
--   installed_required_app_count, current_required_app_count
--                        required apps of the platform (seeds) installed at the end of each of
--                        those days (valid_from <= cutoff < valid_to, cutoff as in
--                        int_device_days), and how many of them at or above their min_version
--   range_number, device_number  numbers (1..n) for the ranges and the devices: int_device_days
--                        expands the ranges to days carrying only these (cheaper to sort and join
--                        than the id text), and joins the range's attributes back after
--   os_version .. blueprint_upgrade_status  the version's attributes that the checks read
--                        (int_device_versions), and first_apps_reported_at and last_heartbeat_at
--                        (int_devices_current): joined here once, not in each reader
-- Ranges rather than days: a version or an install holds for weeks, so the joins and the
-- required-app counts are computed once per range (~1 row per device), not once per day.
with

as_of as (
    select * from intermediate.int_devices_as_of
),

spans as (
    select * from intermediate.int_device_spans
),

versions as (
    select * from intermediate.int_device_versions
),

version_days as (
    -- the version each device ends a UTC day with: its last version stamped that day (a version
    -- stamped after as_of is not known yet). It holds from that day until the day before the
    -- device's next such version, which is exactly "the latest version with updated_at <=
    -- cutoff_at" for every day in between, without an as-of join per device-day.
    select
        versions.device_id as device_id,
        max(versions.updated_at) as version_updated_at,
        utc_date(versions.updated_at) as from_day,
    from versions
    cross join as_of
    where versions.updated_at <= as_of.as_of
    group by versions.device_id, utc_date(versions.updated_at)
),

version_ranges as (
    select
        device_id,
        version_updated_at,
        from_day,
        coalesce(
            lead(from_day) over (partition by device_id order by from_day) - 1,
            date '9999-12-31'
        ) as to_day,
    from version_days
),

span_ranges as (
    -- each version range cut to the days the device belongs to the fleet (int_device_spans),
    -- with the version's platform, group and own last_seen
    select
        version_ranges.device_id as device_id,
        version_ranges.version_updated_at as version_updated_at,
        versions.platform as platform,
        versions.group_id as group_id,
        versions.last_seen_at as version_last_seen_at,
        greatest(version_ranges.from_day, spans.first_day) as from_day,
        least(version_ranges.to_day, spans.last_day) as to_day,
    from version_ranges
    inner join spans
        on spans.device_id = version_ranges.device_id
    inner join versions
        on versions.device_id = version_ranges.device_id
        and versions.updated_at = version_ranges.version_updated_at
    where greatest(version_ranges.from_day, spans.first_day)
        <= least(version_ranges.to_day, spans.last_day)
),

required_apps as (
    select * from staging.stg_seeds__required_apps
),

required_app_rows as (
    -- installs of required apps as UTC day ranges: installed at the end of day d (cutoff_at) when
    -- valid_from <= cutoff_at < valid_to, i.e. from_day <= d <= to_day; judged against the minimum
    -- once per install, not once per day
    select
        app_versions.device_id as device_id,
        app_versions.package_name as package_name,
        required_apps.platform as platform,
        coalesce(app_versions.version_key >= required_apps.min_version_key, false) as meets_minimum,
        utc_date(app_versions.valid_from) as from_day,
        coalesce(utc_date(app_versions.valid_to) - 1, date '9999-12-31') as to_day,
    from intermediate.int_device_app_versions as app_versions
    inner join required_apps
        on required_apps.package_name = app_versions.package_name
),

app_boundaries as (
    -- the days a device's set of required installs can change: an install starts, or the day
    -- after one ends; plus the spine start, so the segments below cover every spine day
    select
        required_app_rows.device_id as device_id,
        required_app_rows.platform as platform,
        as_of.spine_start_date as boundary_day,
    from required_app_rows
    cross join as_of
    union
    select
        device_id,
        platform,
        from_day as boundary_day,
    from required_app_rows
    union
    select
        device_id,
        platform,
        to_day + 1 as boundary_day,
    from required_app_rows
    where to_day < date '9999-12-31'
),

app_segments as (
    -- consecutive boundaries: within a segment the same required installs hold every day
    select
        device_id,
        platform,
        boundary_day as from_day,
        coalesce(
            lead(boundary_day) over (partition by device_id, platform order by boundary_day) - 1,
            date '9999-12-31'
        ) as to_day,
    from app_boundaries
),

app_segment_counts as (
    -- required packages installed through each segment (an install covers a whole segment or
    -- none of it), and how many of them meet the minimum with any of their installs
    select
        app_segments.device_id as device_id,
        app_segments.platform as platform,
        app_segments.from_day as from_day,
        app_segments.to_day as to_day,
        count(distinct required_app_rows.package_name) as installed_app_count,
        count(distinct required_app_rows.package_name) filter (
            where required_app_rows.meets_minimum
        ) as current_app_count,
    from app_segments
    left join required_app_rows
        on required_app_rows.device_id = app_segments.device_id
        and required_app_rows.platform = app_segments.platform
        and required_app_rows.from_day <= app_segments.from_day
        and required_app_rows.to_day >= app_segments.from_day
    group by app_segments.device_id, app_segments.platform, app_segments.from_day, app_segments.to_day
),

ranges as (
    -- version ranges cut by the required-app segments of the version's platform (a device with
    -- no required install of its platform keeps its version ranges, with no apps)
    select
        span_ranges.device_id as device_id,
        span_ranges.version_updated_at as version_updated_at,
        span_ranges.platform as platform,
        span_ranges.group_id as group_id,
        span_ranges.version_last_seen_at as version_last_seen_at,
        greatest(span_ranges.from_day, coalesce(app_segment_counts.from_day, span_ranges.from_day))
            as from_day,
        least(span_ranges.to_day, coalesce(app_segment_counts.to_day, span_ranges.to_day))
            as to_day,
        coalesce(app_segment_counts.installed_app_count, 0) as installed_required_app_count,
        coalesce(app_segment_counts.current_app_count, 0) as current_required_app_count,
    from span_ranges
    left join app_segment_counts
        on app_segment_counts.device_id = span_ranges.device_id
        and app_segment_counts.platform = span_ranges.platform
        and app_segment_counts.from_day <= span_ranges.to_day
        and app_segment_counts.to_day >= span_ranges.from_day
),

devices as (
    select * from intermediate.int_devices_current
),

final as (
    select
        ranges.*,
        row_number() over (order by ranges.device_id, ranges.from_day) as range_number,
        cast(dense_rank() over (order by ranges.device_id) as integer) as device_number,
        versions.os_version as os_version,
        versions.os_check as os_check,
        versions.security_patch_level as security_patch_level,
        versions.agent_version as agent_version,
        versions.agent_check as agent_check,
        versions.has_security_patch_target as has_security_patch_target,
        versions.security_patch_deadline as security_patch_deadline,
        versions.assigned_blueprint_id as assigned_blueprint_id,
        versions.current_blueprint_id as current_blueprint_id,
        versions.current_blueprint_version_id as current_blueprint_version_id,
        versions.blueprint_upgrade_status as blueprint_upgrade_status,
        versions.is_in_service as is_in_service,
        devices.first_apps_reported_at as first_apps_reported_at,
        devices.last_heartbeat_at as last_heartbeat_at,
    from ranges
    inner join versions
        on versions.device_id = ranges.device_id
        and versions.updated_at = ranges.version_updated_at
    left join devices
        on devices.device_id = ranges.device_id
)

select * from final
