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
with

operations as (
    select * from staging.stg_esper__operations
),

operation_devices as (
    select *
    from staging.stg_esper__operation_devices
    where operation_id is not null
    qualify row_number() over (
        partition by operation_id, coalesce(device_id, operation_device_id)
        order by updated_at desc nulls last, operation_device_id desc
    ) = 1
),

per_operation as (
    select
        operation_id,
        count(*) as target_devices,
        count(*) filter (where state = 'queued') as queued_devices,
        count(*) filter (where state = 'initiated') as initiated_devices,
        count(*) filter (where state in ('acknowledged', 'in_progress')) as in_progress_devices,
        count(*) filter (where state = 'scheduled') as scheduled_devices,
        count(*) filter (where state = 'success') as success_devices,
        count(*) filter (where state = 'failure') as failure_devices,
        count(*) filter (where state = 'timeout') as timeout_devices,
        count(*) filter (where state = 'cancelled') as cancelled_devices,
        count(*) filter (where state = 'unknown') as unknown_state_devices,
        count(*) filter (where is_terminal) as terminal_devices,
        quantile_cont(epoch(updated_at - created_at) / 60.0, 0.5) filter (where is_terminal)
            as p50_minutes_to_terminal,
        quantile_cont(epoch(updated_at - created_at) / 60.0, 0.9) filter (where is_terminal)
            as p90_minutes_to_terminal,
        max(updated_at) as last_device_update_at,
    from operation_devices
    group by operation_id
),

failure_reasons as (
    select
        operation_id,
        coalesce(reason, '(no reason given)') as reason,
        count(*) as devices,
    from operation_devices
    where state in ('failure', 'timeout')
    group by operation_id, coalesce(reason, '(no reason given)')
),

top_reasons as (
    select
        operation_id,
        list({'reason': reason, 'devices': devices} order by devices desc, reason)[1:3]
            as top_failure_reasons,
    from failure_reasons
    group by operation_id
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
        coalesce(per_operation.target_devices, 0) as target_devices,
        coalesce(per_operation.queued_devices, 0) as queued_devices,
        coalesce(per_operation.initiated_devices, 0) as initiated_devices,
        coalesce(per_operation.in_progress_devices, 0) as in_progress_devices,
        coalesce(per_operation.scheduled_devices, 0) as scheduled_devices,
        coalesce(per_operation.success_devices, 0) as success_devices,
        coalesce(per_operation.failure_devices, 0) as failure_devices,
        coalesce(per_operation.timeout_devices, 0) as timeout_devices,
        coalesce(per_operation.cancelled_devices, 0) as cancelled_devices,
        coalesce(per_operation.unknown_state_devices, 0) as unknown_state_devices,
        coalesce(per_operation.terminal_devices, 0) as terminal_devices,
        coalesce(per_operation.target_devices - per_operation.terminal_devices, 0) as pending_devices,
        per_operation.success_devices / nullif(per_operation.target_devices, 0) as success_rate,
        per_operation.failure_devices / nullif(per_operation.target_devices, 0) as failure_rate,
        per_operation.timeout_devices / nullif(per_operation.target_devices, 0) as timeout_rate,
        per_operation.terminal_devices / nullif(per_operation.target_devices, 0) as completion_rate,
        coalesce(
            per_operation.target_devices > 0
                and per_operation.terminal_devices = per_operation.target_devices,
            false
        ) as is_complete,
        per_operation.p50_minutes_to_terminal as p50_minutes_to_terminal,
        per_operation.p90_minutes_to_terminal as p90_minutes_to_terminal,
        coalesce(top_reasons.top_failure_reasons, []) as top_failure_reasons,
        operations.api_success_device_count as api_success_device_count,
        operations.api_failed_device_count as api_failed_device_count,
        per_operation.last_device_update_at as last_device_update_at,
    from operations
    left join per_operation
        on per_operation.operation_id = operations.operation_id
    left join top_reasons
        on top_reasons.operation_id = operations.operation_id
    where operations.operation_id is not null
)

select * from final
