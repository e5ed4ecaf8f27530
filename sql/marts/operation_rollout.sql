-- operation_rollout: how far has each operation got? One row per operation, with its per-device
-- parts (operation_devices) counted the same way as command_rollout. States are tidied to the
-- command enum (staging: SUCCEDED -> success, FAILED -> failure, CREATED -> queued, ...).
--
-- Columns
--   operation_id                 the operation
--   operation_type               CONVERGE, INSTALL_APP, ...
--   operation_alias, schedule_type   as the API gives them
--   state, state_raw, is_terminal    the operation's own state (tidied / API text / terminal?)
--   created_at, updated_at       the operation's timestamps
--   created_by                   the id of the user who created the operation (created_by; a user_id
--                                of marts.fleet_access)
--   created_by_name              that user's name (the tenant's users, authn2 `name`); NULL when
--                                the id is no user the access tables hold (not read, refused,
--                                removed)
--   target_devices               devices with a per-device record (the denominator); 0 when none
--                                yet (then every rate is NULL)
--   queued_devices, initiated_devices, in_progress_devices, scheduled_devices
--                                devices in that non-terminal state
--   success_devices, failure_devices, timeout_devices, cancelled_devices
--                                devices in that terminal state
--   unknown_state_devices        a state string the models do not know (see staging)
--   terminal_devices             success + failure + timeout + cancelled
--   pending_devices              target_devices - terminal_devices
--   success_rate, failure_rate, timeout_rate   success/failure/timeout devices / target_devices
--   completion_rate              terminal_devices / target_devices
--   is_complete                  every target is terminal (false with no targets)
--   p50_minutes_to_terminal, p90_minutes_to_terminal
--                                median and 90th percentile (interpolated) over terminal devices of
--                                (device record updated_at - created_at), in minutes
--   top_failure_reasons          up to 3 {reason, devices} among failure and timeout devices
--   api_success_device_count, api_failed_device_count
--                                the API's own tally (operation_stats), to cross-check the recount
--   last_device_update_at        latest updated_at of its per-device records
--   failing_rank                 1 = the worst: rank by failure + timeout rate (highest first), then
--                                more target devices, then the id, among those with 5 target
--                                devices or more (NULL below 5); marts.headlines, the demo and the
--                                report's "Most failing" table read it (intermediate.int_rollout_progress)
--   data_as_of                   the time the operations family (operations and their devices) is as of
--                                (intermediate.int_family_freshness): its figures hold at that time
--   age_note                     how old that is, in the words every surface prints (NULL: current)
with

age as (
    select data_as_of, age_note
    from intermediate.int_family_freshness
    where family = 'operations'
),

operations as (
    select * from staging.stg_esper__operations
),

progress as (
    select * from intermediate.int_rollout_progress
    where rollout_kind = 'operation'
),

users as (
    select * from staging.stg_esper__users
),

final as (
    select
        operations.operation_id as operation_id,
        operations.operation_type as operation_type,
        operations.operation_alias as operation_alias,
        operations.schedule_type as schedule_type,
        operations.state as state,
        operations.state_raw as state_raw,
        operations.is_terminal as is_terminal,
        operations.created_at as created_at,
        operations.updated_at as updated_at,
        operations.created_by as created_by,
        users.user_name as created_by_name,
        -- target_devices ... top_failure_reasons, as documented above; operations count an
        -- acknowledged device as in progress
        progress.* exclude (rollout_kind, rollout_id, acknowledged_devices, last_update_at)
            replace (progress.acknowledged_devices + progress.in_progress_devices
                as in_progress_devices),
        operations.api_success_device_count as api_success_device_count,
        operations.api_failed_device_count as api_failed_device_count,
        progress.last_update_at as last_device_update_at,
        age.data_as_of as data_as_of,
        age.age_note as age_note,
    from operations
    cross join age
    left join progress
        on progress.rollout_id = operations.operation_id
    left join users
        on users.user_id = operations.created_by
    where operations.operation_id is not null
)

select * from final
