-- command_rollout: how far has each command got? One row per command request, with its
-- per-device statuses counted. When a device has several status records for one request, its
-- latest (updated_at) counts.
--
-- Columns
--   command_request_id           the request
--   command                      the command (REBOOT, INSTALL, ...)
--   command_type                 DEVICE, GROUP or DYNAMIC
--   schedule_type                IMMEDIATE, WINDOW, RECURRING
--   created_by, created_at       who issued it, when
--   requested_device_count       device ids listed in the request (0 for a group-only request)
--   requested_group_count        group ids listed in the request
--   target_devices               devices with a status for this request (the denominator); 0 when
--                                none yet (then every rate is NULL)
--   queued_devices, initiated_devices, acknowledged_devices, in_progress_devices,
--   scheduled_devices            devices whose latest status is in that non-terminal state
--   success_devices, failure_devices, timeout_devices, cancelled_devices
--                                devices whose latest status is in that terminal state
--   unknown_state_devices        a state string the models do not know (see staging)
--   terminal_devices             success + failure + timeout + cancelled
--   pending_devices              target_devices - terminal_devices
--   success_rate, failure_rate, timeout_rate   success/failure/timeout devices / target_devices
--   completion_rate              terminal_devices / target_devices
--   is_complete                  every target has a terminal status (false with no targets)
--   p50_minutes_to_terminal, p90_minutes_to_terminal
--                                median and 90th percentile (interpolated) over devices in a
--                                terminal state of (status updated_at - status created_at), minutes
--   top_failure_reasons          up to 3 {reason, devices} among failure and timeout statuses,
--                                most frequent first ('(no reason given)' when empty)
--   last_status_at               latest updated_at of its statuses
with

requests as (
    select * from staging.stg_esper__command_requests
),

statuses as (
    select *
    from staging.stg_esper__command_statuses
    where command_request_id is not null
    qualify row_number() over (
        partition by command_request_id, coalesce(device_id, command_status_id)
        order by updated_at desc nulls last, command_status_id desc
    ) = 1
),

per_request as (
    select
        command_request_id,
        count(*) as target_devices,
        count(*) filter (where state = 'queued') as queued_devices,
        count(*) filter (where state = 'initiated') as initiated_devices,
        count(*) filter (where state = 'acknowledged') as acknowledged_devices,
        count(*) filter (where state = 'in_progress') as in_progress_devices,
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
        max(updated_at) as last_status_at,
    from statuses
    group by command_request_id
),

failure_reasons as (
    select
        command_request_id,
        coalesce(reason, '(no reason given)') as reason,
        count(*) as devices,
    from statuses
    where state in ('failure', 'timeout')
    group by command_request_id, coalesce(reason, '(no reason given)')
),

top_reasons as (
    select
        command_request_id,
        list({'reason': reason, 'devices': devices} order by devices desc, reason)[1:3]
            as top_failure_reasons,
    from failure_reasons
    group by command_request_id
),

final as (
    select
        requests.command_request_id as command_request_id,
        requests.command as command,
        requests.command_type as command_type,
        requests.schedule_type as schedule_type,
        requests.created_by as created_by,
        requests.created_at as created_at,
        requests.requested_device_count as requested_device_count,
        requests.requested_group_count as requested_group_count,
        coalesce(per_request.target_devices, 0) as target_devices,
        coalesce(per_request.queued_devices, 0) as queued_devices,
        coalesce(per_request.initiated_devices, 0) as initiated_devices,
        coalesce(per_request.acknowledged_devices, 0) as acknowledged_devices,
        coalesce(per_request.in_progress_devices, 0) as in_progress_devices,
        coalesce(per_request.scheduled_devices, 0) as scheduled_devices,
        coalesce(per_request.success_devices, 0) as success_devices,
        coalesce(per_request.failure_devices, 0) as failure_devices,
        coalesce(per_request.timeout_devices, 0) as timeout_devices,
        coalesce(per_request.cancelled_devices, 0) as cancelled_devices,
        coalesce(per_request.unknown_state_devices, 0) as unknown_state_devices,
        coalesce(per_request.terminal_devices, 0) as terminal_devices,
        coalesce(per_request.target_devices - per_request.terminal_devices, 0) as pending_devices,
        per_request.success_devices / nullif(per_request.target_devices, 0) as success_rate,
        per_request.failure_devices / nullif(per_request.target_devices, 0) as failure_rate,
        per_request.timeout_devices / nullif(per_request.target_devices, 0) as timeout_rate,
        per_request.terminal_devices / nullif(per_request.target_devices, 0) as completion_rate,
        coalesce(
            per_request.target_devices > 0
                and per_request.terminal_devices = per_request.target_devices,
            false
        ) as is_complete,
        per_request.p50_minutes_to_terminal as p50_minutes_to_terminal,
        per_request.p90_minutes_to_terminal as p90_minutes_to_terminal,
        coalesce(top_reasons.top_failure_reasons, []) as top_failure_reasons,
        per_request.last_status_at as last_status_at,
    from requests
    left join per_request
        on per_request.command_request_id = requests.command_request_id
    left join top_reasons
        on top_reasons.command_request_id = requests.command_request_id
    where requests.command_request_id is not null
)

select * from final
