-- The Android app catalogue (v1 list, live §11: the legacy list misses apps). v1 items carry no
-- is_active, created_on or updated_on: those columns stay NULL unless an older load (legacy
-- list) filled them. latest_version_* name the newest version the catalogue knows.
with

source as (
    select * from esper.applications
),

renamed as (
    select
        -- ids
        clean_text(id) as application_id,
        clean_text(latest_version__id) as latest_version_id,

        -- descriptors
        clean_text(application_name) as application_name,
        clean_text(package_name) as package_name,
        clean_text(latest_version__version_code) as latest_version_code,

        -- booleans
        cast(is_active as boolean) as is_active,
        cast(is_hidden as boolean) as is_hidden,

        -- timestamps
        as_timestamptz(created_on) as created_at,
        as_timestamptz(updated_on) as updated_at,

    from source
)

select * from renamed
