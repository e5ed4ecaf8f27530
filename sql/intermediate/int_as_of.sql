-- "Now" for every model, one row.
-- as_of: the API time of the latest loaded pipeline run (max(as_of) of _esper_runs whose status
--   is_loaded in sql/vocabulary/run_statuses.csv: ok or partial; a partial run's tables are in,
--   so it moves "now" too); the real clock (now()) when no run was loaded yet. A warehouse loaded
--   from the simulator therefore reads at the simulator's time.
-- spine_start_date: first UTC day of the device x day spine: the day of the first loaded run
--   ("since the first load"); without runs, the day of the oldest device version but no more
--   than 90 days before as_of.
-- loaded_run_count: the runs counted (ok or partial).
with

runs as (
    select * from staging.stg_esper__runs
    where is_loaded
        and as_of is not null
),

run_summary as (
    select
        coalesce(max(as_of), now()) as as_of,
        min(as_of) as first_load_at,
        count(*) as loaded_run_count,
    from runs
),

history as (
    select min(updated_at) as first_version_at
    from staging.stg_esper__device_history
),

final as (
    select
        run_summary.as_of as as_of,
        utc_date(run_summary.as_of) as as_of_date,
        run_summary.first_load_at as first_load_at,
        run_summary.loaded_run_count as loaded_run_count,
        least(
            coalesce(
                utc_date(run_summary.first_load_at),
                greatest(
                    utc_date(history.first_version_at),
                    utc_date(run_summary.as_of) - 90
                ),
                utc_date(run_summary.as_of)
            ),
            utc_date(run_summary.as_of)
        ) as spine_start_date,
    from run_summary
    cross join history
)

select * from final
