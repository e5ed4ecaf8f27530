-- materialized: table
-- app_rollout: described, with every column, in sql/marts/_marts.yml.
--
-- The fleet on a day is the device x day spine (int_device_ranges; removed devices leave it after
-- their last activity).
with

as_of as (
    select * from intermediate.int_devices_as_of
),

spans as (
    select * from intermediate.int_device_spans
),

app_versions as (
    select * from intermediate.int_device_app_versions
),

ranges as (
    select * from intermediate.int_device_ranges
),

devices as (
    select * from intermediate.int_devices_current
),

covered as (
    select
        spans.platform as platform,
        app_versions.package_name as package_name,
        app_versions.version_name as version_name,
        app_versions.version_key as version_key,
        greatest(utc_date(app_versions.valid_from), spans.first_day) as from_day,
        least(coalesce(utc_date(app_versions.valid_to) - 1, spans.last_day), spans.last_day) as to_day,
    from app_versions
    inner join spans
        on spans.device_id = app_versions.device_id
),

events as (
    -- each install covering at least one spine day: +1 on its first day, -1 on the day after its
    -- last (one pass over the installs)
    select
        platform,
        package_name,
        version_name,
        version_key,
        unnest([from_day, to_day + 1]) as day,
        unnest([1, -1]) as delta,
    from covered
    where from_day <= to_day
),

deltas as (
    select
        platform,
        package_name,
        version_name,
        day,
        any_value(version_key) as version_key,
        sum(delta) as delta,
        count(*) filter (where delta = 1) as starts,
    from events
    group by platform, package_name, version_name, day
),

versions as (
    -- each version from the first day an install of it covers
    select
        platform,
        package_name,
        version_name,
        any_value(version_key) as version_key,
        min(day) filter (where starts > 0) as first_day,
    from deltas
    group by platform, package_name, version_name
),

calendar as (
    select cast(unnest(generate_series(spine_start_date, as_of_date, interval 1 day)) as date) as day
    from as_of
),

daily as (
    select
        calendar.day as day,
        versions.platform as platform,
        versions.package_name as package_name,
        versions.version_name as version_name,
        versions.version_key as version_key,
        sum(coalesce(deltas.delta, 0)) over (
            partition by versions.platform, versions.package_name, versions.version_name
            order by calendar.day
        ) as devices_on_version,
    from versions
    inner join calendar
        on calendar.day >= versions.first_day
    left join deltas
        on deltas.platform = versions.platform
        and deltas.package_name = versions.package_name
        and deltas.version_name is not distinct from versions.version_name
        and deltas.day = calendar.day
),

range_reporting as (
    -- the fleet from the ranges of int_device_ranges (the days of int_device_days), never
    -- expanded to days: a range counts its device from from_day to to_day, and as reporting from
    -- the first of those days whose cutoff (end of the day; as_of on the as_of day) is at or after
    -- first_apps_reported_at -- its UTC day, when it is <= as_of (else never)
    select
        ranges.platform as platform,
        ranges.from_day as from_day,
        ranges.to_day as to_day,
        case
            when devices.first_apps_reported_at <= as_of.as_of
                then greatest(ranges.from_day, utc_date(devices.first_apps_reported_at))
        end as reporting_from_day,
    from ranges
    cross join as_of
    left join devices
        on devices.device_id = ranges.device_id
),

fleet_events as (
    -- +1 on the first day, -1 on the day after the last, for the fleet and for reporting
    select
        platform,
        unnest([from_day, to_day + 1]) as day,
        unnest([1, -1]) as fleet_delta,
        0 as reporting_delta,
    from range_reporting
    union all
    select
        platform,
        unnest([reporting_from_day, to_day + 1]) as day,
        0 as fleet_delta,
        unnest([1, -1]) as reporting_delta,
    from range_reporting
    where reporting_from_day <= to_day
),

fleet_deltas as (
    select
        platform,
        day,
        sum(fleet_delta) as fleet_delta,
        sum(reporting_delta) as reporting_delta,
    from fleet_events
    group by platform, day
),

platforms as (
    select distinct platform
    from range_reporting
),

reporting as (
    -- fleet and reporting devices per day and platform: the running sums of the events
    select
        calendar.day as day,
        platforms.platform as platform,
        cast(
            sum(coalesce(fleet_deltas.fleet_delta, 0)) over (
                partition by platforms.platform
                order by calendar.day
            ) as bigint
        ) as fleet_devices,
        cast(
            sum(coalesce(fleet_deltas.reporting_delta, 0)) over (
                partition by platforms.platform
                order by calendar.day
            ) as bigint
        ) as reporting_devices,
    from calendar
    cross join platforms
    left join fleet_deltas
        on fleet_deltas.platform = platforms.platform
        and fleet_deltas.day = calendar.day
),

final as (
    select
        daily.day as day,
        daily.platform as platform,
        daily.package_name as package_name,
        daily.version_name as version_name,
        daily.version_key as version_key,
        cast(daily.devices_on_version as bigint) as devices_on_version,
        coalesce(reporting.reporting_devices, 0) as reporting_devices,
        cast(daily.devices_on_version as double) / nullif(reporting.reporting_devices, 0)
            as share_of_reporting,
        coalesce(reporting.fleet_devices - reporting.reporting_devices, 0) as not_reporting_devices,
        coalesce(reporting.fleet_devices, 0) as fleet_devices,
        daily.version_key is not distinct from max(daily.version_key) filter (
            where daily.devices_on_version > 0
        ) over (partition by daily.day, daily.platform, daily.package_name) as is_highest_version,
        least(utc_day_end(daily.day), as_of.as_of) as data_as_of,
    from daily
    cross join as_of
    left join reporting
        on reporting.day = daily.day
        and reporting.platform = daily.platform
)

select * from final
