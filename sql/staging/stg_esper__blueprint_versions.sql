-- Every version of every blueprint (one row per version_id).
with

source as (
    select * from esper.blueprint_versions
),

renamed as (
    select
        -- ids
        clean_text(id) as blueprint_id,
        clean_text(version_id) as blueprint_version_id,

        -- descriptors
        clean_text(name) as blueprint_name,
        as_json(settings) as settings,

        -- numerics
        cast(version_number as integer) as version_number,
        cast(minor_version_number as integer) as minor_version_number,

        -- booleans
        cast(publish as boolean) as is_published,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
