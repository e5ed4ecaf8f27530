-- The v2 app catalogue: one row per version of a tenant app.
with

source as (
    select * from esper.v2_apps
),

renamed as (
    select
        -- ids
        clean_text(app_version_id) as app_version_id,
        clean_text(app_id) as app_id,
        clean_text(tenant_id) as tenant_id,

        -- descriptors
        clean_text(name) as app_name,
        clean_text(label) as app_label,
        clean_text(package_name) as package_name,
        clean_text(app_type) as app_type,
        clean_text(version_name) as version_name,
        clean_text(build_number) as build_number,
        clean_text(min_sdk_version) as min_sdk_version,

        -- numerics
        cast(file_size_in_kb as bigint) as file_size_in_kb,

        -- booleans
        is_full_screen,
        is_removable,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
