-- The latest command that reached each device, and who sent it: one row per device with at least
-- one command status (a device request lists the device; a group request reaches its members, and
-- each member gets a status). The command's sender is its request's `created_by`, named from the
-- tenant's users (authn2 `name`); NULL name: the id is not a user the access tables hold (not
-- read, refused, or a user since removed).
-- Ties (two requests created at the same instant) break on the request id, so the row is stable.
with

statuses as (
    select distinct device_id, command_request_id
    from staging.stg_esper__command_statuses
    where device_id is not null
),

requests as (
    select * from staging.stg_esper__command_requests
),

users as (
    select * from staging.stg_esper__users
),

reached as (
    select
        statuses.device_id as device_id,
        requests.command_request_id as command_request_id,
        requests.command as command,
        requests.created_by as created_by,
        requests.created_at as created_at,
    from statuses
    inner join requests
        on requests.command_request_id = statuses.command_request_id
),

latest as (
    select
        device_id,
        arg_max(reached, (created_at, command_request_id)) as last,
    from reached
    group by device_id
),

final as (
    select
        latest.device_id as device_id,
        latest.last.command_request_id as last_command_request_id,
        latest.last.command as last_command,
        latest.last.created_by as last_command_by,
        users.user_name as last_command_by_name,
        latest.last.created_at as last_command_at,
    from latest
    left join users
        on users.user_id = latest.last.created_by
)

select * from final
