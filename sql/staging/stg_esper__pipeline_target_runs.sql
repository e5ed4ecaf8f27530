-- One device's part of a stage run (spec `TargetRun`); `command_id` joins the command requests.
with

source as (
    select * from esper.pipeline_target_runs
),

renamed as (
    select
        -- ids
        clean_text(id) as target_run_id,
        clean_text(stage_run_id) as stage_run_id,
        clean_text(device_id) as device_id,
        clean_text(target_id) as target_id,
        clean_text(command_id) as command_id,

        -- descriptors
        clean_text(device_alias) as device_alias,
        lower(clean_text(status)) as status,
        clean_text(command_status) as command_status,
        clean_text(json_extract_string(as_json(command_meta), '$.request_status_reason')) as command_reason,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,
        as_timestamptz(started_at) as started_at,
        as_timestamptz(ended_at) as ended_at,

    from source
)

select * from renamed
