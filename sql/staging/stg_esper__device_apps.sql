-- Apps installed on devices, one row per app per device per validity range (dlt scd2).
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
        clean_text(package_name) as package_name,
        clean_text(app_name) as app_name,
        clean_text(version_name) as version_name,
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
