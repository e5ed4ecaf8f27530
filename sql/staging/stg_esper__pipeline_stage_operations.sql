-- What a stage will carry out (spec `Operation`, per operation list of the stage); `args` is
-- JSON text (an INSTALL names its package; each run's version is the stage run's operation).
with

source as (
    select * from esper.pipeline_stage_operations
),

renamed as (
    select
        -- ids
        clean_text(id) as operation_id,
        clean_text(stage_id) as stage_id,
        clean_text(pipeline_id) as pipeline_id,
        clean_text(operation_list_id) as operation_list_id,

        -- descriptors
        clean_text(operation_list_name) as operation_list_name,
        upper(clean_text(operation_type)) as operation_type,
        as_json(args) as args,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
