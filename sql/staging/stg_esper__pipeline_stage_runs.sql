-- A run's stage runs (spec `StageRun`), one per stage the run reached.
with

source as (
    select * from esper.pipeline_stage_runs
),

renamed as (
    select
        -- ids
        clean_text(id) as stage_run_id,
        clean_text(pipeline_run_id) as pipeline_run_id,
        clean_text(pipeline_id) as pipeline_id,
        clean_text(stage_id) as stage_id,

        -- descriptors
        lower(clean_text(status)) as status,
        as_json(stage_meta) as stage_meta,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,
        as_timestamptz(started_at) as started_at,
        as_timestamptz(ended_at) as ended_at,

    from source
)

select * from renamed
