-- The tenant's users (authn2). Times are text in the raw table (no declared format): read as
-- timestamps where they parse. `legacy_user_id` links to `stg_esper__user_profiles`.
with

source as (
    select * from esper.users
),

renamed as (
    select
        -- ids
        clean_text(user_id) as user_id,
        cast(legacy_user_id as bigint) as legacy_user_id,
        clean_text(tenant_id) as tenant_id,
        clean_text(partner_id) as partner_id,
        clean_text(connection_id) as connection_id,

        -- descriptors
        clean_text(name) as user_name,
        lower(clean_text(email)) as email,

        -- timestamps
        try_cast(clean_text(created_at) as timestamptz) as created_at,
        try_cast(clean_text(updated_at) as timestamptz) as updated_at,

    from source
)

select * from renamed
