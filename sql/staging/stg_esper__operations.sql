-- Operations (GET /v0/operations/). `state` is tidied to the command enum by the vocabulary in
-- sql/vocabulary/work_states.csv (CREATED -> queued; RESOLVING ... DISPATCHED -> initiated;
-- COMPLETED, SUCCESS, SUCCEEDED -> success; CANCELLED, CANCELED -> cancelled; ..., with or
-- without the OPERATION_ prefix); anything else -> 'unknown' (API text in state_raw).
with

source as (
    select * from esper.operations
),

renamed as (
    select
        -- ids
        clean_text(id) as operation_id,
        clean_text(created_by) as created_by,
        clean_text(updated_by) as updated_by,

        -- descriptors
        upper(clean_text(operation)) as operation_type,
        clean_text(alias) as operation_alias,
        upper(clean_text(schedule_type)) as schedule_type,
        clean_text(reason) as reason,
        as_json(operation_stats) as operation_stats,
        as_json(operation_activity) as operation_activity,

        -- states
        clean_text(state) as state_raw,
        tidy_state('operation', clean_text(state)) as state,

        -- numerics (the API's own per-device tally, kept to cross-check the recount)
        cast(
            json_extract(as_json(operation_stats), '$.device_operation_statuses_count.success_device_count')
            as integer
        ) as api_success_device_count,
        cast(
            json_extract(as_json(operation_stats), '$.device_operation_statuses_count.failed_device_count')
            as integer
        ) as api_failed_device_count,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
),

flagged as (
    select
        *,
        is_terminal_state(state) as is_terminal,
    from renamed
)

select * from flagged
