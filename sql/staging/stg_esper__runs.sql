-- Pipeline runs (bookkeeping table `_esper_runs`). as_of is the API's time of the run.
-- is_loaded: the run's load is committed, ok or partial (sql/vocabulary/run_statuses.csv).
-- unavailable: table -> why the run skipped it, whole or in part.
-- api_device_count: the API's device count as the run opened (NULL: not read, or an earlier release).
-- has_table_record: the run recorded how it treated each table it read (staging.stg_esper__run_tables);
--   runs of releases before that record did not.
with

source as (
    select * from esper._esper_runs
),

renamed as (
    select
        -- ids
        clean_text(run_id) as run_id,

        -- descriptors
        lower(clean_text(mode)) as run_mode,
        lower(clean_text(status)) as run_status,
        as_json(rows) as rows_loaded,
        as_json(unavailable) as unavailable,

        -- numerics
        cast(requests as bigint) as request_count,
        cast(retries as bigint) as retry_count,
        cast(throttled as bigint) as throttled_count,
        cast(device_count as bigint) as api_device_count,

        -- booleans
        lower(clean_text(status)) = 'ok' as is_ok,
        tables is not null as has_table_record,
        lower(clean_text(status)) in (
            select status from seeds.run_statuses where is_loaded = 'true'
        ) as is_loaded,

        -- timestamps
        as_timestamptz(started_at) as started_at,
        as_timestamptz(finished_at) as finished_at,
        as_timestamptz(as_of) as as_of,

    from source
)

select * from renamed
