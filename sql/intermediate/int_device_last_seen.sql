-- Last seen per device: the latest of its heartbeat observations and its own `last_seen` field
-- (Apple, Windows, Linux; Android reports last-seen only through heartbeats). NULL = never seen.
with

devices as (
    select * from staging.stg_esper__devices
),

heartbeats as (
    select
        device_id,
        max(seen_at) as last_heartbeat_at,
    from staging.stg_esper__heartbeats
    group by device_id
),

final as (
    select
        devices.device_id as device_id,
        heartbeats.last_heartbeat_at as last_heartbeat_at,
        devices.last_seen_at as device_last_seen_at,
        greatest(heartbeats.last_heartbeat_at, devices.last_seen_at) as last_seen_at,
    from devices
    left join heartbeats
        on heartbeats.device_id = devices.device_id
)

select * from final
