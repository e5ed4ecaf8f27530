-- The tenant's roles (authz2). `role_type` and `organization_type` are integers the API
-- documents no meaning for: kept as they come.
with

source as (
    select * from esper.roles
),

renamed as (
    select
        -- ids
        clean_text(id) as role_id,

        -- descriptors
        clean_text(name) as role_name,
        clean_text(description) as description,

        -- numerics
        cast(role_type as integer) as role_type,
        cast(organization_type as integer) as organization_type,

    from source
)

select * from renamed
