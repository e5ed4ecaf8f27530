-- Apple and Windows apps of the tenant (GET /v2/tenant-apps).
with

source as (
    select * from esper.tenant_apps
),

renamed as (
    select
        -- ids
        clean_text(id) as tenant_app_id,

        -- descriptors
        upper(clean_text(platform)) as platform,
        clean_text(package_name) as package_name,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
