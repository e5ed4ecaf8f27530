-- operation_rollout: described, with every column, in sql/marts/_marts.yml.
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
