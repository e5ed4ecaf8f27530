-- Per-device statuses of command requests. `state` is tidied from the API's spaced strings
-- ('Command In Progress' -> in_progress, 'Command TimeOut' -> timeout) by the vocabulary in
-- sql/vocabulary/work_states.csv; a value it does not know becomes 'unknown' (the API's text
-- stays in state_raw).
with

source as (
    select * from esper.command_statuses
),

renamed as (
    select
        -- ids
        clean_text(id) as command_status_id,
        ref_id(request) as command_request_id,
        ref_id(device) as device_id,

        -- states
        clean_text(state) as state_raw,
        tidy_state('command', clean_text(state)) as state,
        clean_text(reason) as reason,

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
