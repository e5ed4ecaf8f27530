-- Raw tables of the `esper` dataset, as docs/contracts.md section 3 declares them: only the
-- columns the models read (dlt loads every other API field too).
--
-- Used twice:
--   * pipelines/models.py creates an EMPTY placeholder for each table below that does not exist
--     yet (no load so far, or a resource that has never produced a row), so every model builds on
--     an empty warehouse. Tables that exist are never altered; dlt adds its own columns to a
--     placeholder on its first load.
--   * tests/sql build hand-made fixture warehouses from the same declarations.
-- One `create table esper.<name> (...)` per table, each ending with `;` at the end of a line.

create table esper.devices (
    id varchar,
    name varchar,
    alias varchar,
    os varchar,
    platform varchar,
    state bigint,
    state_text varchar,
    serial varchar,
    os_version varchar,
    group_id varchar,
    tags json,
    is_gms boolean,
    dpc_version varchar,
    created_at timestamptz,
    updated_at timestamptz,
    provisioned_on timestamptz,
    last_seen timestamptz,
    hardware_info__brand varchar,
    hardware_info__model varchar,
    hardware_info__manufacturer varchar,
    software_info__security_patch_level varchar,
    software_info__os_build_number varchar,
    software_info__esper_agent_info__version_name varchar,
    blueprint_info__assigned_blueprint_id varchar,
    blueprint_info__current_blueprint_id varchar,
    blueprint_info__current_blueprint_version_id varchar,
    blueprint_info__blueprint_upgrade_status varchar,
    battery_stats__battery_level bigint
);

create table esper.device_history (
    id varchar,
    name varchar,
    alias varchar,
    os varchar,
    platform varchar,
    state bigint,
    state_text varchar,
    serial varchar,
    os_version varchar,
    group_id varchar,
    tags json,
    is_gms boolean,
    dpc_version varchar,
    created_at timestamptz,
    updated_at timestamptz,
    provisioned_on timestamptz,
    last_seen timestamptz,
    hardware_info__brand varchar,
    hardware_info__model varchar,
    hardware_info__manufacturer varchar,
    software_info__security_patch_level varchar,
    software_info__os_build_number varchar,
    software_info__esper_agent_info__version_name varchar,
    blueprint_info__assigned_blueprint_id varchar,
    blueprint_info__current_blueprint_id varchar,
    blueprint_info__current_blueprint_version_id varchar,
    blueprint_info__blueprint_upgrade_status varchar,
    battery_stats__battery_level bigint
);

create table esper.device_census (
    id varchar,
    updated_at timestamptz,
    census_at timestamptz
);

create table esper.heartbeats (
    device_id varchar,
    timestamp timestamptz,
    status bigint
);

create table esper.groups (
    id varchar,
    name varchar,
    parent varchar,
    path varchar,
    device_count bigint,
    children_count bigint,
    blueprint varchar,
    created_on timestamptz,
    enterprise varchar
);

create table esper.blueprints (
    id varchar,
    name varchar,
    version_id varchar,
    version_number bigint,
    minor_version_number bigint,
    publish boolean,
    settings json,
    created_at timestamptz,
    updated_at timestamptz
);

create table esper.blueprint_versions (
    id varchar,
    name varchar,
    version_id varchar,
    version_number bigint,
    minor_version_number bigint,
    publish boolean,
    settings json,
    created_at timestamptz,
    updated_at timestamptz
);

create table esper.tenant_apps (
    id varchar,
    platform varchar,
    package_name varchar,
    created_at timestamptz,
    updated_at timestamptz
);

create table esper.tenant_app_versions (
    id varchar,
    app_id varchar,
    app_type varchar,
    app_name varchar,
    version_name varchar,
    version_code varchar,
    build_number varchar,
    created_at timestamptz,
    updated_at timestamptz
);

create table esper.applications (
    id varchar,
    application_name varchar,
    package_name varchar,
    is_active boolean,
    is_hidden boolean,
    latest_version__id varchar,
    latest_version__version_code varchar,
    created_on timestamptz,
    updated_on timestamptz
);

create table esper.application_versions (
    id varchar,
    application_id varchar,
    version_code varchar,
    build_number varchar,
    release_name varchar,
    approval_status varchar,
    installed_count bigint,
    is_enabled boolean,
    created_on timestamptz,
    updated_on timestamptz,
    release_date timestamptz
);

create table esper.device_apps (
    id varchar,
    device_id varchar,
    route varchar,
    package_name varchar,
    app_name varchar,
    version_code varchar,
    version_name varchar,
    app_id varchar,
    app_version_id varchar,
    app_type varchar,
    bundle_id varchar,
    apple_app_version varchar,
    state varchar,
    is_active boolean,
    created_on timestamptz,
    updated_on timestamptz,
    created_at timestamptz,
    updated_at timestamptz,
    _dlt_valid_from timestamptz,
    _dlt_valid_to timestamptz
);

create table esper.command_requests (
    id varchar,
    command_type varchar,
    command varchar,
    command_args json,
    devices json,
    groups json,
    device_type varchar,
    schedule varchar,
    reason varchar,
    alias varchar,
    created_by varchar,
    created_at timestamptz
);

create table esper.command_statuses (
    id varchar,
    request varchar,
    device varchar,
    state varchar,
    reason varchar,
    created_at timestamptz,
    updated_at timestamptz
);

create table esper.operations (
    id varchar,
    operation varchar,
    state varchar,
    alias varchar,
    reason varchar,
    schedule_type varchar,
    created_at timestamptz,
    updated_at timestamptz,
    operation_stats json,
    operation_activity json
);

create table esper.operation_devices (
    id varchar,
    operation_id varchar,
    device_id varchar,
    state varchar,
    reason varchar,
    created_at timestamptz,
    updated_at timestamptz,
    device_operation_activity json
);

create table esper.device_events (
    id bigint,
    device_id varchar,
    message_id varchar,
    device_status_id varchar,
    created_on timestamptz,
    message varchar,
    device varchar,
    enterprise varchar
);

create table esper.status_metrics (
    snapshot_date varchar,
    as_of timestamptz,
    recently_added bigint,
    low_battery bigint,
    under_provisioning bigint,
    unprovisioned_devices bigint,
    secure bigint,
    low_risk bigint,
    medium_risk bigint,
    high_risk bigint,
    total_devices_under_risk bigint,
    unspecified bigint,
    last_seen__first_period bigint,
    last_seen__second_period bigint,
    last_seen__third_period bigint
);

create table esper._esper_runs (
    run_id varchar,
    started_at timestamptz,
    finished_at timestamptz,
    as_of timestamptz,
    mode varchar,
    status varchar,
    requests bigint,
    retries bigint,
    throttled bigint,
    rows json
);
