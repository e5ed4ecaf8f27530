-- The operation a stage run carried out (spec `StageRunOperation`); `args` is JSON text.
with

source as (
    select * from esper.pipeline_stage_run_operations
),

renamed as (
    select
        -- ids
        clean_text(id) as stage_run_operation_id,
        clean_text(stage_run_id) as stage_run_id,

        -- descriptors
        upper(clean_text(operation_type)) as operation_type,
        as_json(args) as args,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
