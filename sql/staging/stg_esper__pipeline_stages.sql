-- A pipeline's stages (spec `Stage`); `stage_order` is the place in the pipeline's list, from 1.
with

source as (
    select * from esper.pipeline_stages
),

renamed as (
    select
        -- ids
        clean_text(id) as stage_id,
        clean_text(pipeline_id) as pipeline_id,

        -- descriptors
        clean_text(name) as stage_name,
        clean_text(description) as description,

        -- numerics
        cast(stage_order as integer) as stage_order,
        cast(timeout_seconds as bigint) as timeout_seconds,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
