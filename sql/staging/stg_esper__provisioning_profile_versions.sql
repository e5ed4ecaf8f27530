-- Every version of every provisioning profile (the signed `download_url` is never loaded).
with

source as (
    select * from esper.provisioning_profile_versions
),

renamed as (
    select
        -- ids
        clean_text(id) as profile_version_id,
        clean_text(profile_id) as profile_id,
        clean_text(uuid) as apple_profile_uuid,

        -- descriptors
        clean_text(name) as profile_version_name,
        clean_text(sha256_hash) as sha256_hash,
        as_json(clean_text(platforms)) as platforms,
        as_json(clean_text(entitlements)) as entitlements,
        as_json(clean_text(developer_certificates)) as developer_certificates,

        -- numerics
        cast(time_to_live as integer) as time_to_live_days,

        -- booleans
        cast(provisions_all_devices as boolean) as provisions_all_devices,
        cast(is_xcode_managed as boolean) as is_xcode_managed,

        -- timestamps
        as_timestamptz(creation_date) as profile_created_at,
        as_timestamptz(expiration_date) as expires_at,
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
