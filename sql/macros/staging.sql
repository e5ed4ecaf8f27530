-- Staging shared by twin raw tables: the current rows and the history of one record hold the
-- same columns (dlt's merge table and its scd2 history, or a record and its versions), so their
-- renaming and casting is written once here, as a table macro over `query_table(raw_table)`.
-- The staging views call it with the raw table as a string (`'esper.devices'`): the build points
-- that reference at the raw dataset like any other, and the lineage reads it from the view.
-- Filters and column choices on the views still reach the table scan (the macro is expanded).

-- staged_devices(raw_table): one row per row of `esper.devices` or `esper.device_history`.
create or replace macro staged_devices(raw_table) as table
select
    -- ids
    clean_text(id) as device_id,
    clean_text(group_id) as group_id,
    clean_text(blueprint_info__assigned_blueprint_id) as assigned_blueprint_id,
    clean_text(blueprint_info__current_blueprint_id) as current_blueprint_id,
    clean_text(blueprint_info__current_blueprint_version_id) as current_blueprint_version_id,

    -- descriptors
    clean_text(name) as device_name,
    clean_text(alias) as device_alias,
    clean_text(serial) as serial_number,
    upper(clean_text(platform)) as platform,
    clean_text(os) as os,
    clean_text(os_version) as os_version,
    version_key(clean_text(os_version)) as os_version_key,
    clean_text(software_info__os_build_number) as os_build_number,
    clean_text(software_info__security_patch_level) as security_patch_level_raw,
    coalesce(
        try_cast(clean_text(software_info__security_patch_level) as date),
        try_cast(clean_text(software_info__security_patch_level) || '-01' as date)
    ) as security_patch_level,
    clean_text(software_info__esper_agent_info__version_name) as agent_version,
    version_key(clean_text(software_info__esper_agent_info__version_name)) as agent_version_key,
    clean_text(dpc_version) as dpc_version,
    clean_text(hardware_info__brand) as hardware_brand,
    clean_text(hardware_info__model) as hardware_model,
    clean_text(hardware_info__manufacturer) as hardware_manufacturer,
    upper(clean_text(blueprint_info__blueprint_upgrade_status)) as blueprint_upgrade_status,
    as_json(tags) as tags,
    clean_text(state_text) as device_state_text,
    -- Esper's own verdicts (codes: sql/vocabulary/drift_states.csv). security_state is null in
    -- every live recording and a string in Esper's documents ("LOW_RISK"): the text of a string,
    -- any other JSON value as its JSON text
    case json_type(as_json(security_state))
        when 'NULL' then null
        when 'VARCHAR' then clean_text(json_extract_string(as_json(security_state), '$'))
        else cast(as_json(security_state) as varchar)
    end as esper_security_state,
    as_json(active_plugins) as active_plugins,

    -- numerics
    cast(state as integer) as device_state,
    cast(battery_stats__battery_level as integer) as battery_level_pct,
    cast(drift_state as integer) as esper_drift_state,
    cast(drift_severity as integer) as esper_drift_severity,

    -- booleans
    cast(is_gms as boolean) as is_gms,

    -- timestamps
    as_timestamptz(created_at) as created_at,
    as_timestamptz(updated_at) as updated_at,
    as_timestamptz(provisioned_on) as provisioned_at,
    as_timestamptz(last_seen) as last_seen_at,

from query_table(raw_table);

-- staged_blueprints(raw_table): one row per row of `esper.blueprints` or
-- `esper.blueprint_versions`.
create or replace macro staged_blueprints(raw_table) as table
select
    -- ids
    clean_text(id) as blueprint_id,
    clean_text(version_id) as blueprint_version_id,

    -- descriptors
    clean_text(name) as blueprint_name,
    as_json(settings) as settings,

    -- numerics
    cast(version_number as integer) as version_number,
    cast(minor_version_number as integer) as minor_version_number,

    -- booleans
    cast(publish as boolean) as is_published,

    -- timestamps
    as_timestamptz(created_at) as created_at,
    as_timestamptz(updated_at) as updated_at,

from query_table(raw_table);
