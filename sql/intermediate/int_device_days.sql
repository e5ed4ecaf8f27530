-- materialized: table
-- The device x day spine: one row per UTC day each device belonged to the fleet
-- (int_device_spans), with what decides its compliance that day. cutoff_at = the last instant of
-- the day, or as_of for the as_of day, so the as_of row is the device as it is now. Days are UTC
-- whatever the session TimeZone.
--   version_updated_at   the device's version that day: the latest with updated_at <= cutoff_at.
--                        Its attributes (os, patch level, blueprints, ...) live in
--                        int_device_versions: join on (device_id, updated_at = version_updated_at)
--   platform, group_id   of that version (kept here: every consumer groups by them)
--   last_seen_at         the latest heartbeat <= cutoff_at and the version's own last_seen (when
--                        <= cutoff_at)
--   installed_required_app_count, current_required_app_count
--                        required apps of the platform (seeds) installed at cutoff_at
--                        (valid_from <= cutoff_at < valid_to), and how many of them at or above
--                        their min_version
-- Kept narrow on purpose: millions of rows are written here, once, and read by
-- int_device_day_checks and app_rollout.
with

as_of as (
    select * from intermediate.int_as_of
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
        versions.updated_at as version_updated_at,
        utc_date(versions.updated_at) as from_day,
    from versions
    cross join as_of
    where versions.updated_at <= as_of.as_of
    qualify row_number() over (
        partition by versions.device_id, utc_date(versions.updated_at)
        order by versions.updated_at desc
    ) = 1
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
    -- each version range cut to the days the device belongs to the fleet (int_device_spans)
    select
        version_ranges.device_id as device_id,
        version_ranges.version_updated_at as version_updated_at,
        greatest(version_ranges.from_day, spans.first_day) as from_day,
        least(version_ranges.to_day, spans.last_day) as to_day,
    from version_ranges
    inner join spans
        on spans.device_id = version_ranges.device_id
),

spine as (
    -- one row per device and day, carrying the version it ended the day with
    select
        device_id,
        version_updated_at,
        cast(unnest(generate_series(from_day, to_day, interval 1 day)) as date) as day,
    from span_ranges
    where from_day <= to_day
),

heartbeats as (
    select
        device_id,
        seen_at,
    from staging.stg_esper__heartbeats
    where device_id is not null
        and seen_at is not null
),

with_cutoff as (
    select
        spine.device_id as device_id,
        spine.day as day,
        least(utc_day_end(spine.day), as_of.as_of) as cutoff_at,
        spine.version_updated_at as version_updated_at,
    from spine
    cross join as_of
),

heartbeat_picked as (
    -- the latest heartbeat <= cutoff_at (pipelines/models.py keeps DuckDB from turning this
    -- as-of join into a per-row loop: it cannot size the spine in advance)
    select
        with_cutoff.*,
        heartbeats.seen_at as heartbeat_at,
    from with_cutoff
    asof left join heartbeats
        on heartbeats.device_id = with_cutoff.device_id
        and heartbeats.seen_at <= with_cutoff.cutoff_at
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

required_app_days as (
    -- each install of a required app, one row per spine day it covers (within spine_start_date ..
    -- as_of_date): the installs expanded to days instead of a range join per device-day
    select
        required_app_rows.device_id as device_id,
        required_app_rows.platform as platform,
        required_app_rows.package_name as package_name,
        required_app_rows.meets_minimum as meets_minimum,
        cast(
            unnest(
                generate_series(
                    greatest(required_app_rows.from_day, as_of.spine_start_date),
                    least(required_app_rows.to_day, as_of.as_of_date),
                    interval 1 day
                )
            ) as date
        ) as day,
    from required_app_rows
    cross join as_of
    where greatest(required_app_rows.from_day, as_of.spine_start_date)
        <= least(required_app_rows.to_day, as_of.as_of_date)
),

installed_packages as (
    -- each required package installed on a device-day, meeting the minimum if any of its
    -- installs valid that day does
    select
        device_id,
        day,
        platform,
        package_name,
        bool_or(meets_minimum) as meets_minimum,
    from required_app_days
    group by device_id, day, platform, package_name
),

installed_per_day as (
    -- required apps of the platform installed on each device-day, and how many of them are at
    -- or above their minimum; joined to the spine on device, day and platform
    select
        device_id,
        day,
        platform,
        count(*) as installed_app_count,
        count(*) filter (where meets_minimum) as current_app_count,
    from installed_packages
    group by device_id, day, platform
),

final as (
    -- narrow on purpose (millions of rows): the version's attributes are joined back from
    -- int_device_versions on (device_id, version_updated_at) where they are needed
    select
        picked.device_id as device_id,
        picked.day as day,
        picked.cutoff_at as cutoff_at,
        versions.platform as platform,
        versions.group_id as group_id,
        picked.version_updated_at as version_updated_at,
        greatest(
            picked.heartbeat_at,
            case when versions.last_seen_at <= picked.cutoff_at then versions.last_seen_at end
        ) as last_seen_at,
        coalesce(installed_per_day.installed_app_count, 0) as installed_required_app_count,
        coalesce(installed_per_day.current_app_count, 0) as current_required_app_count,
    from heartbeat_picked as picked
    inner join versions
        on versions.device_id = picked.device_id
        and versions.updated_at = picked.version_updated_at
    left join installed_per_day
        on installed_per_day.device_id = picked.device_id
        and installed_per_day.day = picked.day
        and installed_per_day.platform = versions.platform
)

select * from final
