-- Esper Pipelines: a tenant's staged rollouts (spec `Pipeline`).
with

source as (
    select * from esper.pipelines
),

renamed as (
    select
        -- ids
        clean_text(id) as pipeline_id,
        clean_text(enterprise_id) as enterprise_id,

        -- descriptors
        clean_text(name) as pipeline_name,
        clean_text(description) as description,
        cast(is_active as boolean) as is_active,
        cast(is_archived as boolean) as is_archived,

        -- numerics
        cast(timeout_seconds as bigint) as timeout_seconds,
        cast(created_by as bigint) as created_by,
        cast(updated_by as bigint) as updated_by,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
