-- Versions of the tenant's Apple and Windows apps.
with

source as (
    select * from esper.tenant_app_versions
),

renamed as (
    select
        -- ids
        clean_text(id) as tenant_app_version_id,
        clean_text(app_id) as tenant_app_id,

        -- descriptors
        clean_text(app_type) as app_type,
        clean_text(app_name) as app_name,
        clean_text(version_name) as version_name,
        clean_text(version_code) as version_code,
        clean_text(build_number) as build_number,
        version_key(coalesce(clean_text(version_name), clean_text(version_code))) as version_key,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
