-- Last-seen observations (GET /v2/heartbeat/): one row per device and check-in time loaded.
with

source as (
    select * from esper.heartbeats
),

renamed as (
    select
        -- ids
        clean_text(device_id) as device_id,

        -- numerics
        cast(status as integer) as heartbeat_status,

        -- timestamps
        as_timestamptz(timestamp) as seen_at,

    from source
)

select * from renamed
