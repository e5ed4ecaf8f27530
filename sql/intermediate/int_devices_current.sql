-- materialized: table
-- One row per device the API has ever served (removed ones included, flagged), with its current
-- group path, blueprints, last seen and first app inventory.
-- is_removed: the device is in `devices` but not in the latest complete scan (device_census), and
--   was last updated before that scan (contract, docs/contracts.md section 3). No complete scan yet
--   -> nobody is removed.
-- last_activity_at: the latest of last seen and updated_at; a removed device leaves the daily
--   spine after the day of its last activity (the API keeps no removal date).
-- first_apps_reported_at: when the device first reported its app inventory (NULL = never).
-- esper_drift_state_name, is_esper_drifted: Esper's drift code read through
--   sql/vocabulary/drift_states.csv (NULL: not reported, or a code the vocabulary does not know).
-- last_heartbeat_at: its latest heartbeat <= as_of (int_device_last_seen); the as_of day of
--   int_device_days reads it from here instead of scanning the heartbeats again.
-- last_user_id, last_user_name, last_user_at: who sent the latest command that reached the
--   device, and when (int_device_last_command); NULL: no command reached it.
with

devices as (
    select * from staging.stg_esper__devices
),

census as (
    select * from staging.stg_esper__device_census
),

census_scan as (
    select max(census_at) as census_at
    from census
),

groups as (
    select * from staging.stg_esper__groups
),

blueprints as (
    select * from staging.stg_esper__blueprints
),

last_seen as (
    select * from intermediate.int_device_last_seen
),

device_states as (
    select
        cast(code as integer) as device_state,
        name as device_state_name,
    from seeds.device_states
),

drift_states as (
    select
        cast(code as integer) as esper_drift_state,
        name as esper_drift_state_name,
        cast(is_drifted as boolean) as is_esper_drifted,
    from seeds.drift_states
),

last_commands as (
    select * from intermediate.int_device_last_command
),

app_reports as (
    -- any app row is a report of the inventory, resolved to a package or not
    select
        device_id,
        min(valid_from) as first_apps_reported_at,
    from staging.stg_esper__device_apps
    where device_id is not null
    group by device_id
),

final as (
    select
        -- ids
        devices.device_id as device_id,
        devices.group_id as group_id,
        devices.assigned_blueprint_id as assigned_blueprint_id,
        devices.current_blueprint_id as current_blueprint_id,
        devices.current_blueprint_version_id as current_blueprint_version_id,

        -- descriptors
        devices.device_name as device_name,
        devices.device_alias as device_alias,
        devices.serial_number as serial_number,
        devices.platform as platform,
        devices.os as os,
        devices.os_version as os_version,
        devices.security_patch_level as security_patch_level,
        devices.agent_version as agent_version,
        devices.hardware_manufacturer as hardware_manufacturer,
        devices.hardware_model as hardware_model,
        devices.blueprint_upgrade_status as blueprint_upgrade_status,
        devices.device_state as device_state,
        -- a text state the vocabulary does not know is shown as served (lowercase)
        coalesce(device_states.device_state_name, lower(devices.device_state_text))
            as device_state_name,
        groups.group_name as group_name,
        groups.group_path as group_path,
        assigned_blueprints.blueprint_name as assigned_blueprint_name,
        devices.esper_drift_state as esper_drift_state,
        coalesce(drift_states.esper_drift_state_name, cast(devices.esper_drift_state as varchar))
            as esper_drift_state_name,
        devices.esper_drift_severity as esper_drift_severity,
        devices.esper_security_state as esper_security_state,
        devices.active_plugins as active_plugins,
        last_commands.last_command_by as last_user_id,
        last_commands.last_command_by_name as last_user_name,

        -- booleans
        drift_states.is_esper_drifted as is_esper_drifted,
        census_scan.census_at is not null
            and census.device_id is null
            and devices.updated_at < census_scan.census_at as is_removed,

        -- timestamps
        devices.created_at as created_at,
        devices.provisioned_at as provisioned_at,
        devices.updated_at as updated_at,
        last_commands.last_command_at as last_user_at,
        last_seen.last_seen_at as last_seen_at,
        last_seen.last_heartbeat_at as last_heartbeat_at,
        greatest(coalesce(last_seen.last_seen_at, devices.updated_at), devices.updated_at)
            as last_activity_at,
        census_scan.census_at as census_at,
        app_reports.first_apps_reported_at as first_apps_reported_at,

    from devices
    cross join census_scan
    left join census
        on census.device_id = devices.device_id
    left join groups
        on groups.group_id = devices.group_id
    left join device_states
        on device_states.device_state = devices.device_state
    left join drift_states
        on drift_states.esper_drift_state = devices.esper_drift_state
    left join blueprints as assigned_blueprints
        on assigned_blueprints.blueprint_id = devices.assigned_blueprint_id
    left join last_seen
        on last_seen.device_id = devices.device_id
    left join app_reports
        on app_reports.device_id = devices.device_id
    left join last_commands
        on last_commands.device_id = devices.device_id
    where devices.device_id is not null
)

select * from final
