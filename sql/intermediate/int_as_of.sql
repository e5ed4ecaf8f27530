-- "Now" for every model, one row.
-- as_of: the API time of the latest loaded pipeline run (max(as_of) of _esper_runs whose status
--   is_loaded in sql/vocabulary/run_statuses.csv: ok or partial; a partial run's tables are in,
--   so it moves "now" too); the real clock (now()) when no run was loaded yet. A warehouse loaded
--   from the simulator therefore reads at the simulator's time. Every clock rule is judged here.
-- aged_at: the time every age is counted to: as_of, or later when runs after the latest loaded
--   one loaded nothing (failed, interrupted, fell short, killed): a night that refreshed no table
--   leaves every table a night older. Such a run's night is its API time; a run that saw none
--   (no answer, or killed before the first) is placed by the wall clock: the latest loaded run's
--   as_of plus the wall-clock time between the two runs' starts (the two clocks are never mixed).
-- night_note: what such runs did, in the words the age notes append: 'the run of 2026-10-04
--   00:00 UTC failed'; '3 runs since did not load; the run of 2026-10-04 00:00 UTC failed' (the
--   latest); NULL when the latest run loaded.
-- spine_start_date: first UTC day of the device x day spine: the day of the first loaded run
--   ("since the first load"); without runs, the day of the oldest device version but no more
--   than 90 days before as_of.
-- loaded_run_count: the runs counted (ok or partial).
with

recorded as (
    select * from staging.stg_esper__runs
),

statuses as (
    select * from seeds.run_statuses
),

runs as (
    select * from recorded
    where is_loaded
        and as_of is not null
),

run_summary as (
    select
        coalesce(max(as_of), now()) as as_of,
        min(as_of) as first_load_at,
        arg_max(started_at, as_of) as last_load_started_at,
        count(*) as loaded_run_count,
    from runs
),

-- the runs since the latest loaded one that loaded nothing, each at the time of its night
unloaded as (
    select
        recorded.run_status,
        recorded.started_at,
        coalesce(
            recorded.as_of,
            run_summary.as_of + (recorded.started_at - run_summary.last_load_started_at),
            run_summary.as_of
        ) as night_at,
    from recorded
    cross join run_summary
    where not recorded.is_loaded
        and (
            run_summary.last_load_started_at is null
            or recorded.started_at > run_summary.last_load_started_at
        )
),

nights as (
    select
        count(*) as night_count,
        max(night_at) as aged_at,
        arg_max(run_status, started_at) as last_status,
        arg_max(night_at, started_at) as last_night_at,
    from unloaded
),

history as (
    select min(updated_at) as first_version_at
    from staging.stg_esper__device_history
),

final as (
    select
        run_summary.as_of as as_of,
        utc_date(run_summary.as_of) as as_of_date,
        greatest(run_summary.as_of, nights.aged_at) as aged_at,
        case
            when nights.night_count > 0
                then case
                    when nights.night_count > 1
                        then nights.night_count || ' runs since did not load; '
                    else ''
                end
                || 'the run of '
                || strftime(timezone('UTC', nights.last_night_at), '%Y-%m-%d %H:%M')
                || ' UTC ' || coalesce(statuses.words, nights.last_status)
        end as night_note,
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
    cross join nights
    cross join history
    left join statuses
        on statuses.status = nights.last_status
)

select * from final
