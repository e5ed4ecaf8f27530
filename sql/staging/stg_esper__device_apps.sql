-- Apps installed on devices, one row per app per device per validity range (dlt scd2).
-- Android rows come from the legacy route, Apple and Windows rows from the v2 route.
-- valid_to NULL = installed now; set = gone from (or changed in) a later complete list.
with

source as (
    select * from esper.device_apps
),

renamed as (
    select
        -- ids
        clean_text(id) as device_app_id,
        ref_id(device_id) as device_id,
        clean_text(app_id) as app_id,
        clean_text(app_version_id) as app_version_id,

        -- descriptors
        lower(clean_text(route)) as route,
        -- Apple apps (v2 route, live §9) name their package `bundle_id` and their version
        -- `apple_app_version`; VPP and ESPER_IOS apps are in no tenant app list, so these are the
        -- only package and version they have.
        coalesce(clean_text(package_name), clean_text(bundle_id)) as package_name,
        clean_text(app_name) as app_name,
        coalesce(clean_text(version_name), clean_text(apple_app_version)) as version_name,
        clean_text(version_code) as version_code,
        clean_text(app_type) as app_type,
        clean_text(state) as app_state,

        -- booleans
        cast(is_active as boolean) as is_active,
        _dlt_valid_to is null as is_current,

        -- timestamps
        coalesce(as_timestamptz(created_at), as_timestamptz(created_on)) as created_at,
        coalesce(as_timestamptz(updated_at), as_timestamptz(updated_on)) as updated_at,
        as_timestamptz(_dlt_valid_from) as valid_from,
        as_timestamptz(_dlt_valid_to) as valid_to,

    from source
)

select * from renamed
