-- Last seen per device: the latest of its heartbeat observations and its own `last_seen` field
-- (Apple, Windows, Linux; Android reports last-seen only through heartbeats). NULL = never seen.
-- Heartbeats count up to as_of (int_as_of), like every other model: the warehouse as of as_of.
with

devices as (
    select * from staging.stg_esper__devices
),

as_of as (
    select * from intermediate.int_devices_as_of
),

heartbeats as (
    select
        heartbeats.device_id as device_id,
        max(heartbeats.seen_at) as last_heartbeat_at,
    from staging.stg_esper__heartbeats as heartbeats
    cross join as_of
    where heartbeats.seen_at <= as_of.as_of
    group by heartbeats.device_id
),

final as (
    select
        devices.device_id as device_id,
        heartbeats.last_heartbeat_at as last_heartbeat_at,
        devices.last_seen_at as device_last_seen_at,
        -- either may be NULL: the later of those present (explicit, as greatest is NULL on
        -- some engines when one argument is)
        greatest(
            coalesce(heartbeats.last_heartbeat_at, devices.last_seen_at),
            coalesce(devices.last_seen_at, heartbeats.last_heartbeat_at)
        ) as last_seen_at,
    from devices
    left join heartbeats
        on heartbeats.device_id = devices.device_id
)

select * from final
