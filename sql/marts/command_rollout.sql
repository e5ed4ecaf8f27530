-- command_rollout: how far has each command got? One row per command request, with its
-- per-device statuses counted. When a device has several status records for one request, its
-- latest (updated_at) counts.
--
-- Columns
--   command_request_id           the request
--   command                      the command (REBOOT, INSTALL, ...)
--   command_type                 DEVICE, GROUP or DYNAMIC
--   schedule_type                IMMEDIATE, WINDOW, RECURRING
--   created_by, created_at       who issued it (the user's id: a user_id of marts.fleet_access), when
--   created_by_name              that user's name (the tenant's users, authn2 `name`); NULL when
--                                the id is no user the access tables hold (not read, refused,
--                                removed)
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
--   failing_rank                 1 = the worst: rank by failure + timeout rate (highest first), then
--                                more target devices, then the id, among those with 5 target
--                                devices or more (NULL below 5); marts.headlines, the demo and the
--                                report's "Most failing" table read it (intermediate.int_rollout_progress)
--   data_as_of                   the time the commands family (command requests and statuses) is as of
--                                (intermediate.int_family_freshness): its figures hold at that time
--   age_note                     how old that is, in the words every surface prints (NULL: current)
with

age as (
    select data_as_of, age_note
    from intermediate.int_family_freshness
    where family = 'commands'
),

requests as (
    select * from staging.stg_esper__command_requests
),

progress as (
    select * from intermediate.int_rollout_progress
    where rollout_kind = 'command'
),

users as (
    select * from staging.stg_esper__users
),

final as (
    select
        requests.command_request_id as command_request_id,
        requests.command as command,
        requests.command_type as command_type,
        requests.schedule_type as schedule_type,
        requests.created_by as created_by,
        users.user_name as created_by_name,
        requests.created_at as created_at,
        requests.requested_device_count as requested_device_count,
        requests.requested_group_count as requested_group_count,
        -- target_devices ... top_failure_reasons, as documented above
        progress.* exclude (rollout_kind, rollout_id, last_update_at),
        progress.last_update_at as last_status_at,
        age.data_as_of as data_as_of,
        age.age_note as age_note,
    from requests
    cross join age
    left join progress
        on progress.rollout_id = requests.command_request_id
    left join users
        on users.user_id = requests.created_by
    where requests.command_request_id is not null
)

select * from final
