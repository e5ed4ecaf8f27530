-- Device event feed entries. Legacy records link by URL: `device`, `enterprise` become ids.
with

source as (
    select * from esper.device_events
),

renamed as (
    select
        -- ids
        cast(id as bigint) as event_id,
        coalesce(clean_text(device_id), ref_id(device)) as device_id,
        ref_id(enterprise) as enterprise_id,
        clean_text(message_id) as message_id,
        clean_text(device_status_id) as device_status_id,

        -- descriptors
        clean_text(message) as message,

        -- timestamps
        as_timestamptz(created_on) as created_at,

    from source
)

select * from renamed
