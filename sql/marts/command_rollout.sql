-- command_rollout: described, with every column, in sql/marts/_marts.yml.
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
