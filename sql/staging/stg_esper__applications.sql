-- Legacy (Android) apps of the enterprise.
with

source as (
    select * from esper.applications
),

renamed as (
    select
        -- ids
        clean_text(id) as application_id,

        -- descriptors
        clean_text(application_name) as application_name,
        clean_text(package_name) as package_name,

        -- booleans
        cast(is_active as boolean) as is_active,

        -- timestamps
        as_timestamptz(created_on) as created_at,
        as_timestamptz(updated_on) as updated_at,

    from source
)

select * from renamed
