-- Apple provisioning profiles (their current version): what signs the tenant's in-house apps.
with

source as (
    select * from esper.provisioning_profiles
),

renamed as (
    select
        -- ids
        clean_text(id) as profile_id,
        clean_text(version_id) as profile_version_id,

        -- descriptors
        clean_text(name) as profile_name,
        clean_text(team_identifier) as team_identifier,
        clean_text(app_identifier) as app_identifier,
        lower(clean_text(profile_type)) as profile_type,

        -- timestamps
        as_timestamptz(expiration_date) as expires_at,
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
