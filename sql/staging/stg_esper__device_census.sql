-- The devices present in the latest complete device scan (replaced on each complete scan).
with

source as (
    select * from esper.device_census
),

renamed as (
    select
        -- ids
        clean_text(id) as device_id,

        -- timestamps
        as_timestamptz(updated_at) as updated_at,
        as_timestamptz(census_at) as census_at,

    from source
)

select * from renamed
