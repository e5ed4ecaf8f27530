-- Versions of the Android apps (v1 version lists, live route 6).
with

source as (
    select * from esper.application_versions
),

renamed as (
    select
        -- ids
        clean_text(id) as application_version_id,
        ref_id(application_id) as application_id,

        -- descriptors
        clean_text(version_code) as version_code,
        clean_text(build_number) as build_number,
        clean_text(release_name) as release_name,
        version_key(coalesce(clean_text(release_name), clean_text(version_code))) as version_key,
        clean_text(approval_status) as approval_status,

        -- counts
        cast(installed_count as bigint) as installed_count,

        -- booleans
        cast(is_enabled as boolean) as is_enabled,

        -- timestamps
        as_timestamptz(created_on) as created_at,
        as_timestamptz(updated_on) as updated_at,
        as_timestamptz(release_date) as released_at,

    from source
)

select * from renamed
