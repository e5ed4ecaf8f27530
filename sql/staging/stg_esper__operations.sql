-- Operations (GET /v0/operations/). `state` is tidied to the command enum:
-- CREATED -> queued; RESOLVING, RESOLVED, DISPATCHING, DISPATCHED -> initiated;
-- PROCESSING -> in_progress; COMPLETED, SUCCESS -> success; FAILED, FAILURE -> failure;
-- TIMEOUT -> timeout; SCHEDULED -> scheduled; CANCELLED -> cancelled (with or without the
-- OPERATION_ prefix of the integer table); anything else -> 'unknown' (API text in state_raw).
with

source as (
    select * from esper.operations
),

renamed as (
    select
        -- ids
        clean_text(id) as operation_id,

        -- descriptors
        upper(clean_text(operation)) as operation_type,
        clean_text(alias) as operation_alias,
        upper(clean_text(schedule_type)) as schedule_type,
        clean_text(reason) as reason,
        as_json(operation_stats) as operation_stats,
        as_json(operation_activity) as operation_activity,

        -- states
        clean_text(state) as state_raw,
        case regexp_replace(upper(replace(clean_text(state), ' ', '_')), '^OPERATION_', '')
            when 'CREATED' then 'queued'
            when 'RESOLVING' then 'initiated'
            when 'RESOLVED' then 'initiated'
            when 'DISPATCHING' then 'initiated'
            when 'DISPATCHED' then 'initiated'
            when 'PROCESSING' then 'in_progress'
            when 'COMPLETED' then 'success'
            when 'SUCCESS' then 'success'
            when 'FAILED' then 'failure'
            when 'FAILURE' then 'failure'
            when 'TIMEOUT' then 'timeout'
            when 'SCHEDULED' then 'scheduled'
            when 'CANCELLED' then 'cancelled'
            when 'CANCELED' then 'cancelled'
            else 'unknown'
        end as state,

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
