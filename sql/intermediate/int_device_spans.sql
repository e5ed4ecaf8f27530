-- The UTC days each device belongs to the fleet, within the spine (spine_start_date .. as_of_date):
-- from the day of its first known version (or the spine start, if earlier) to as_of_date; for a
-- removed device, to the day of its last activity (never including as_of_date).
with

as_of as (
    select * from intermediate.int_devices_as_of
),

versions as (
    select
        device_id,
        min(updated_at) as first_version_at,
    from intermediate.int_device_versions
    group by device_id
),

devices as (
    select * from intermediate.int_devices_current
),

spans as (
    select
        versions.device_id as device_id,
        devices.platform as platform,
        coalesce(devices.is_removed, false) as is_removed,
        greatest(utc_date(versions.first_version_at), as_of.spine_start_date) as first_day,
        case
            when coalesce(devices.is_removed, false)
                then least(utc_date(devices.last_activity_at), as_of.as_of_date - 1)
            else as_of.as_of_date
        end as last_day,
    from versions
    cross join as_of
    left join devices
        on devices.device_id = versions.device_id
)

select * from spans
where first_day <= last_day
