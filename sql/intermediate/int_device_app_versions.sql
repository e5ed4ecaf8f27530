-- Every app on every device per validity range, with package and version resolved: legacy
-- (Android) rows carry them; v2 (Apple/Windows) rows may only carry app and version ids, which
-- are looked up in the tenant app catalogue. version_key compares versions part by part (looked
-- up in int_app_version_keys, parsed once per distinct version string). installed_at is when the
-- device got this version: the record's own updated_at (updated_on), which the API moves when the
-- installed app changes, else (and never later than) the load that first held the row.
-- A view: each reader (int_device_ranges, int_device_required_apps, int_device_app_latest,
-- app_rollout) reads only the columns and rows it needs, which costs less than writing millions
-- of rows once (measured: docs/decisions.md).
with

device_apps as (
    select * from staging.stg_esper__device_apps
),

tenant_apps as (
    select * from staging.stg_esper__tenant_apps
),

tenant_app_versions as (
    select * from staging.stg_esper__tenant_app_versions
),

resolved as (
    select
        -- ids
        device_apps.device_app_id as device_app_id,
        device_apps.device_id as device_id,
        coalesce(device_apps.app_id, tenant_app_versions.tenant_app_id) as app_id,
        device_apps.app_version_id as app_version_id,

        -- descriptors
        device_apps.route as route,
        coalesce(device_apps.package_name, tenant_apps.package_name) as package_name,
        coalesce(device_apps.app_name, tenant_app_versions.app_name) as app_name,
        coalesce(
            device_apps.version_name,
            tenant_app_versions.version_name,
            device_apps.version_code,
            tenant_app_versions.version_code
        ) as version_name,

        -- validity
        device_apps.valid_from as valid_from,
        device_apps.valid_to as valid_to,
        device_apps.is_current as is_current,
        least(coalesce(device_apps.updated_at, device_apps.valid_from), device_apps.valid_from)
            as installed_at,

    from device_apps
    left join tenant_app_versions
        on tenant_app_versions.tenant_app_version_id = device_apps.app_version_id
    left join tenant_apps
        on tenant_apps.tenant_app_id = coalesce(device_apps.app_id, tenant_app_versions.tenant_app_id)
),

kept as (
    select *
    from resolved
    where device_id is not null
        and package_name is not null
        and valid_from is not null
),

version_keys as (
    select * from intermediate.int_app_version_keys
),

final as (
    select
        kept.*,
        version_keys.version_key as version_key,
    from kept
    left join version_keys
        on version_keys.version_name = kept.version_name
)

select * from final
