-- Apple provisioning profiles (their current version): what signs the tenant's in-house apps.
-- expires_at: the expiry as the loader read it (NULL when it cannot be read); expires_as_served
-- keeps it as served.
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
        clean_text(expiration_date_text) as expires_as_served,

        -- timestamps
        as_timestamptz(expiration_date) as expires_at,
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
