-- stale_devices: the current devices that have not checked in within a day, with how long and
-- where. One row per current (not removed) device in the stale, offline, missing or never_seen
-- bucket; online and active devices are left out.
--
-- Columns
--   as_of                        "now" the rules are judged at: the time the devices family (devices,
--                                history, heartbeats, installed apps) is as of
--                                (intermediate.int_devices_as_of); the latest loaded run's API time
--                                unless a run since could not read those tables
--   data_as_of                   the same time, NULL when the devices were never loaded
--   age_note                     how old that is, in the words every surface prints (NULL: loaded
--                                by the latest run; intermediate.int_family_freshness)
--   device_id, device_name, device_alias, serial_number   the device
--   platform, os_version         what it is
--   group_id, group_name, group_path   where it is (group now)
--   last_seen_bucket             stale (1-7 days), offline (7-30 days), missing (> 30 days), never_seen
--   last_seen_at                 latest of heartbeats and the device's own last_seen; NULL = never
--   hours_since_seen             hours from last_seen_at to as_of (NULL if never seen)
--   days_since_seen              whole days from last_seen_at to as_of (NULL if never seen)
--   verdict                      its fleet_compliance verdict (unverified unless stale)
with

compliance as (
    select * from marts.fleet_compliance
),

final as (
    select
        as_of,
        data_as_of,
        age_note,
        device_id,
        device_name,
        device_alias,
        serial_number,
        platform,
        os_version,
        group_id,
        group_name,
        group_path,
        last_seen_bucket,
        last_seen_at,
        hours_since_seen,
        cast(floor(hours_since_seen / 24) as integer) as days_since_seen,
        verdict,
    from compliance
    where last_seen_bucket not in ('online', 'active')
)

select * from final
