-- The device x day spine: one row per UTC day each device belonged to the fleet
-- (int_device_spans), with what decides its compliance that day: the ranges of int_device_ranges
-- expanded to days, plus the last heartbeat. cutoff_at = the last instant of the day, or as_of for
-- the as_of day, so the as_of row is the device as it is now. Days are UTC whatever the session
-- TimeZone.
--   is_as_of_day         day = as_of_date. The as_of day is built apart from the other days (its
--                        heartbeat is the device's latest <= as_of), so a consumer that keeps only
--                        is_as_of_day (fleet_compliance) never expands the history: DuckDB drops
--                        that branch when it pushes the filter down
--   version_updated_at   the device's version that day: the latest with updated_at <= cutoff_at.
--                        Its attributes live in int_device_versions (join on device_id,
--                        updated_at = version_updated_at); the ones the checks read (os_version,
--                        os_check, security_patch_level, agent_version, agent_check,
--                        has_security_patch_target, security_patch_deadline, the blueprint ids,
--                        blueprint_upgrade_status) are carried here (int_device_ranges joins
--                        them once per range)
--   first_apps_reported_at  when the device first reported its app inventory (NULL = never),
--                        from int_devices_current (also through int_device_ranges)
--   platform, group_id   of that version (kept here: every consumer groups by them)
--   last_seen_at         the latest heartbeat <= cutoff_at and the version's own last_seen (when
--                        <= cutoff_at)
--   installed_required_app_count, current_required_app_count
--                        required apps of the platform (seeds) installed at cutoff_at
--                        (valid_from <= cutoff_at < valid_to), and how many of them at or above
--                        their min_version
-- A view: millions of rows, judged once by fleet_compliance_daily (through int_device_day_checks).
with

as_of as (
    select * from intermediate.int_devices_as_of
),

device_numbers as (
    -- the number of each device (int_device_ranges): the heartbeat ranges below sort on it
    select distinct
        device_id,
        device_number,
    from intermediate.int_device_ranges
),

ranges as (
    -- each range with the attributes of its version that the checks read (int_device_ranges
    -- joined them once per range); the days below carry only its number
    select
        * exclude (last_heartbeat_at),
        last_heartbeat_at as as_of_heartbeat_at,
    from intermediate.int_device_ranges
),

heartbeats as (
    select
        device_id,
        seen_at,
    from staging.stg_esper__heartbeats
    where device_id is not null
        and seen_at is not null
),

heartbeat_ranges as (
    -- the days each heartbeat is a device's latest at the day's end: from its UTC day to the day
    -- before the device's next heartbeat's (seen_at <= the end of day d exactly when its UTC day
    -- <= d; of several heartbeats in one day only the last keeps a non-empty range). The first
    -- heartbeat's range starts at the earliest date, and the days before its own day get none
    -- (history_cut). Ranges, not an as-of join per device-day: the days are expanded below from
    -- the overlap of these and the device's ranges.
    select
        device_numbers.device_number as device_number,
        heartbeats.seen_at as heartbeat_at,
        utc_date(heartbeats.seen_at) as heartbeat_day,
        case
            when lag(heartbeats.seen_at) over by_time is null then date '0001-01-01'
            else utc_date(heartbeats.seen_at)
        end as from_day,
        coalesce(utc_date(lead(heartbeats.seen_at) over by_time) - 1, date '9999-12-31')
            as to_day,
    from heartbeats
    inner join device_numbers
        on device_numbers.device_id = heartbeats.device_id
    window by_time as (partition by device_numbers.device_number order by heartbeats.seen_at)
),

history_picked as (
    -- the days before as_of: one row per range and day, with the latest heartbeat <= the day's
    -- end (a device without heartbeats matches no heartbeat range: NULL)
    select
        ranges.* exclude (from_day, to_day, range_number, device_number, as_of_heartbeat_at),
        cast(
            unnest(
                generate_series(
                    greatest(ranges.from_day, coalesce(heartbeat_ranges.from_day, ranges.from_day)),
                    least(
                        ranges.to_day,
                        coalesce(heartbeat_ranges.to_day, ranges.to_day),
                        as_of.as_of_date - 1
                    ),
                    interval 1 day
                )
            ) as date
        ) as day,
        false as is_as_of_day,
        heartbeat_ranges.heartbeat_day as heartbeat_day,
        heartbeat_ranges.heartbeat_at as heartbeat_at,
    from ranges
    cross join as_of
    left join heartbeat_ranges
        on heartbeat_ranges.device_number = ranges.device_number
        and heartbeat_ranges.from_day <= least(ranges.to_day, as_of.as_of_date - 1)
        and heartbeat_ranges.to_day >= ranges.from_day
        and heartbeat_ranges.from_day <= heartbeat_ranges.to_day
    where ranges.from_day < as_of.as_of_date
),

history_cut as (
    select
        history_picked.* exclude (heartbeat_day, heartbeat_at),
        utc_day_end(history_picked.day) as cutoff_at,
        case
            when history_picked.day >= history_picked.heartbeat_day then history_picked.heartbeat_at
        end as heartbeat_at,
    from history_picked
),

as_of_picked as (
    -- the as_of day, cut off at as_of: the latest heartbeat <= as_of (int_devices_current)
    select
        ranges.* exclude (from_day, to_day, range_number, device_number, as_of_heartbeat_at),
        as_of.as_of_date as day,
        true as is_as_of_day,
        as_of.as_of as cutoff_at,
        ranges.as_of_heartbeat_at as heartbeat_at,
    from ranges
    cross join as_of
    where ranges.from_day <= as_of.as_of_date
        and ranges.to_day >= as_of.as_of_date
),

picked as (
    select * from history_cut
    union all by name
    select * from as_of_picked
),

final as (
    select
        picked.device_id as device_id,
        picked.day as day,
        picked.cutoff_at as cutoff_at,
        picked.is_as_of_day as is_as_of_day,
        picked.platform as platform,
        picked.group_id as group_id,
        picked.version_updated_at as version_updated_at,
        -- either may be NULL: the later of those present, written out (greatest is NULL on some
        -- engines when one argument is)
        coalesce(
            greatest(
                picked.heartbeat_at,
                case
                    when picked.version_last_seen_at <= picked.cutoff_at
                        then picked.version_last_seen_at
                end
            ),
            picked.heartbeat_at,
            case
                when picked.version_last_seen_at <= picked.cutoff_at
                    then picked.version_last_seen_at
            end
        ) as last_seen_at,
        picked.installed_required_app_count as installed_required_app_count,
        picked.current_required_app_count as current_required_app_count,

        -- the version's attributes that the checks read (int_device_versions)
        picked.os_version as os_version,
        picked.os_check as os_check,
        picked.security_patch_level as security_patch_level,
        picked.agent_version as agent_version,
        picked.agent_check as agent_check,
        picked.has_security_patch_target as has_security_patch_target,
        picked.security_patch_deadline as security_patch_deadline,
        picked.assigned_blueprint_id as assigned_blueprint_id,
        picked.current_blueprint_id as current_blueprint_id,
        picked.current_blueprint_version_id as current_blueprint_version_id,
        picked.blueprint_upgrade_status as blueprint_upgrade_status,
        picked.is_in_service as is_in_service,

        -- when the device first reported its app inventory (int_devices_current; NULL = never)
        picked.first_apps_reported_at as first_apps_reported_at,
    from picked
)

select * from final
