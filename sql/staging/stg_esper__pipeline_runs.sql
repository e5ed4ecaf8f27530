-- Runs of the pipelines (spec `PipelineRun`); `status` is the spec's lowercase enum.
with

source as (
    select * from esper.pipeline_runs
),

renamed as (
    select
        -- ids
        clean_text(id) as pipeline_run_id,
        clean_text(pipeline_id) as pipeline_id,

        -- descriptors
        clean_text(pipeline_name) as pipeline_name,
        lower(clean_text(status)) as status,
        as_json(status_meta) as status_meta,

        -- numerics
        cast(run_number as integer) as run_number,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,
        as_timestamptz(started_at) as started_at,
        as_timestamptz(ended_at) as ended_at,

    from source
)

select * from renamed
