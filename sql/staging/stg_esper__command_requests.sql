-- Command requests (GET /commands/v0/commands/).
with

source as (
    select * from esper.command_requests
),

renamed as (
    select
        -- ids
        clean_text(id) as command_request_id,
        clean_text(created_by) as created_by,

        -- descriptors
        upper(clean_text(command)) as command,
        upper(clean_text(command_type)) as command_type,
        clean_text(device_type) as device_type,
        upper(clean_text(schedule)) as schedule_type,
        clean_text(reason) as reason,
        as_json(command_args) as command_args,
        as_json(devices) as requested_device_ids,
        as_json(groups) as requested_group_ids,

        -- numerics
        coalesce(json_array_length(as_json(devices)), 0) as requested_device_count,
        coalesce(json_array_length(as_json(groups)), 0) as requested_group_count,

        -- timestamps
        as_timestamptz(created_at) as created_at,

    from source
)

select * from renamed
