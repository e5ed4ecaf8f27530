-- Per-device parts of operations. `state` is tidied to the command enum (sql/vocabulary/work_states.csv):
-- CREATED, QUEUED -> queued; INITIATED -> initiated; PROCESSING, IN_PROGRESS,
-- CANCELLATION_REQUESTED -> in_progress; SUCCEDED (API spelling), SUCCEEDED, SUCCESS -> success;
-- FAILED, FAILURE -> failure; TIMEOUT, TIMED_OUT -> timeout; SCHEDULED -> scheduled;
-- CANCELLED -> cancelled; anything else -> 'unknown' (API text in state_raw).
with

source as (
    select * from esper.operation_devices
),

renamed as (
    select
        -- ids
        clean_text(id) as operation_device_id,
        clean_text(operation_id) as operation_id,
        ref_id(device_id) as device_id,

        -- states
        clean_text(state) as state_raw,
        tidy_state('operation_device', clean_text(state)) as state,
        clean_text(reason) as reason,
        as_json(device_operation_activity) as device_operation_activity,

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
