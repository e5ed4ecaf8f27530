-- materialized: table
-- Every known version of every device: device_history plus the current devices rows (so a device
-- is known even when its history row is late), one row per device and updated_at; the current
-- row wins a tie (it carries the freshest last_seen). Only the columns the spine and the checks
-- read are kept (a table read by three models; the wide rows cost more to write than they serve):
-- descriptors such as name, serial, tags live in staging.stg_esper__device_history.
-- The checks that depend only on the version are judged here, once per version rather than once
-- per device and day (see int_device_day_checks for the meaning of pass/fail/unknown/not_applicable):
--   os_check, agent_check      version >= the platform's minimum (compared as versions)
--   security_patch_deadline    last day the patch level is young enough (NULL: no target or level)
--   is_in_service              the device's state counts in compliance (sql/vocabulary/
--                              device_states.csv: not disabled, provisioning, wiped or onboarding)
with

current_rows as (
    select *
    from staging.stg_esper__devices
    where device_id is not null
        and updated_at is not null
),

history_rows as (
    select *
    from staging.stg_esper__device_history
    where device_id is not null
        and updated_at is not null
),

history as (
    -- the versions the current rows do not already cover: an anti join on the key, cheaper than
    -- ranking whole rows (device_history is unique on (id, updated_at), its merge key)
    select history_rows.*
    from history_rows
    anti join current_rows
        on current_rows.device_id = history_rows.device_id
        and current_rows.updated_at = history_rows.updated_at
),

deduplicated as (
    select * from current_rows
    union all by name
    select * from history
),

targets as (
    select * from staging.stg_seeds__platform_targets
),

device_states as (
    select
        cast(code as integer) as device_state,
        lower(trim(is_in_service)) = 'true' as is_in_service,
    from seeds.device_states
),

judged as (
    select
        deduplicated.*,
        case
            when targets.min_os_version_key is null then 'not_applicable'
            when deduplicated.os_version_key is null then 'unknown'
            when deduplicated.os_version_key >= targets.min_os_version_key then 'pass'
            else 'fail'
        end as os_check,
        case
            when targets.min_agent_version_key is null then 'not_applicable'
            when deduplicated.agent_version_key is null then 'unknown'
            when deduplicated.agent_version_key >= targets.min_agent_version_key then 'pass'
            else 'fail'
        end as agent_check,
        targets.max_security_patch_age_days is not null as has_security_patch_target,
        deduplicated.security_patch_level + targets.max_security_patch_age_days
            as security_patch_deadline,
        -- a state the vocabulary does not know counts as in service (never hidden)
        coalesce(device_states.is_in_service, true) as is_in_service,
    from deduplicated
    left join targets
        on targets.platform = deduplicated.platform
    left join device_states
        on device_states.device_state = deduplicated.device_state
),

final as (
    select
        -- ids
        device_id,
        group_id,
        assigned_blueprint_id,
        current_blueprint_id,
        current_blueprint_version_id,

        -- descriptors
        platform,
        os_version,
        security_patch_level,
        agent_version,
        blueprint_upgrade_status,
        device_state,

        -- timestamps
        updated_at,
        last_seen_at,

        -- checks judged once per version
        os_check,
        agent_check,
        has_security_patch_target,
        security_patch_deadline,
        is_in_service,
    from judged
)

select * from final
