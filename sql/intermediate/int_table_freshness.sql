-- materialized: table
-- How old each raw table is: the one home of "how old is this table". One row per raw table (the
-- declared ones, and the Data Tap tables a run has read), from the runs' records (_esper_runs).
-- Only loaded runs count (ok or partial, sql/vocabulary/run_statuses.csv); their API time (as_of)
-- is the time a table they loaded holds.
--
-- Columns
--   table_name           the raw table (esper.<table_name>)
--   family               the family it shares its freshness with (seeds.table_families, from the
--                        source's declarations; a Data Tap table is a family of its own)
--   family_label         the family in words
--   last_loaded_at       the time the table's data is as of: a table that was partly refused is as
--                        old as its refused part, so the API time of the latest loaded run that
--                        loaded it whole (no part refused), else of the first that loaded part of
--                        it (its refused part was never loaded; NULL: nothing of it ever was)
--   last_whole_load_at   API time of the latest loaded run that loaded it whole (no part refused)
--   last_part_load_at    API time of the latest loaded run that loaded any of it
--   latest_read_at       API time of the latest loaded run that read the table (loaded it or not)
--   latest_treatment     how that run treated it: loaded, partial, kept, skipped; never_read when
--                        no loaded run read it
--   held_back_since      API time of the first loaded run after last_loaded_at that read the table
--                        and did not load it whole (partial, kept or skipped); NULL when none did
--   route, http_status   the route and status that refusal names (NULL: none, or not an answer of a
--                        route, e.g. a Data Tap quota)
--   read_from            the table whose refusal skipped it, when it is read from another one
--   why                  the refusal in the run's words
--   warehouse_as_of      the warehouse's "now" (intermediate.int_as_of)
--   aged_at              the time ages count to (int_as_of.aged_at: later than warehouse_as_of
--                        after runs that loaded nothing)
--   night_note           what those runs did (int_as_of.night_note; NULL: the latest run loaded)
--   freshness            current (loaded by the latest loaded run, or as new as it, and no run
--                        since failed), behind (older than aged_at), unknown (never loaded)
--   reason               why it is behind or unknown since held_back_since, in the words of
--                        int_family_freshness.reason (NULL: no refusal since its last load)
--   age_note             the table's age in the words of int_family_freshness.age_note: NULL when
--                        current; 'as of <time> UTC (<age>: <reason>)';
--                        'unknown (never loaded: <reason>)'
with

as_of as (
    select as_of, aged_at, night_note from intermediate.int_as_of
),

runs as (
    select * from staging.stg_esper__runs
    where is_loaded
        and as_of is not null
),

declared as (
    select * from seeds.table_families
),

recorded as (
    select
        runs.as_of,
        run_tables.table_name,
        run_tables.treatment,
        run_tables.route,
        run_tables.http_status,
        run_tables.read_from,
        run_tables.why,
    from staging.stg_esper__run_tables as run_tables
    inner join runs
        on runs.run_id = run_tables.run_id
),

-- runs recorded before `tables`: every declared table loaded, unless named unavailable
legacy as (
    select
        runs.as_of,
        declared.table_name,
        case
            when list_contains(json_keys(runs.unavailable), declared.table_name) then 'skipped'
            else 'loaded'
        end as treatment,
        null as route,
        null as http_status,
        null as read_from,
        json_extract_string(runs.unavailable, '$."' || declared.table_name || '"') as why,
    from runs
    cross join declared
    where not runs.has_table_record
),

treated as (
    select * from recorded
    union all
    select * from legacy
),

tables as (
    select table_name, family, family_label from declared
    union
    select distinct
        treated.table_name,
        treated.table_name,
        'Data Tap ' || regexp_replace(treated.table_name, '^data_tap__', ''),
    from treated
    anti join declared
        on declared.table_name = treated.table_name
),

loads as (
    select
        table_name,
        coalesce(
            max(as_of) filter (where treatment = 'loaded'),
            min(as_of) filter (where treatment = 'partial')
        ) as last_loaded_at,
        max(as_of) filter (where treatment = 'loaded') as last_whole_load_at,
        max(as_of) filter (where treatment in ('loaded', 'partial')) as last_part_load_at,
        max(as_of) as latest_read_at,
        arg_max(treatment, as_of) as latest_treatment,
    from treated
    group by table_name
),

-- the first run after the last whole load that read the table and did not load it whole
held_back as (
    select
        treated.table_name,
        arg_min(treated.as_of, treated.as_of) as held_back_since,
        arg_min(treated.route, treated.as_of) as route,
        arg_min(treated.http_status, treated.as_of) as http_status,
        arg_min(treated.read_from, treated.as_of) as read_from,
        arg_min(treated.why, treated.as_of) as why,
    from treated
    inner join loads
        on loads.table_name = treated.table_name
    where treated.treatment in ('partial', 'kept', 'skipped')
        and (loads.last_loaded_at is null or treated.as_of >= loads.last_loaded_at)
        and (treated.treatment <> 'partial' or loads.last_whole_load_at is null
            or treated.as_of > loads.last_whole_load_at)
    group by treated.table_name
),

joined as (
    select
        tables.table_name,
        tables.family,
        tables.family_label,
        loads.last_loaded_at,
        loads.last_whole_load_at,
        loads.last_part_load_at,
        loads.latest_read_at,
        coalesce(loads.latest_treatment, 'never_read') as latest_treatment,
        held_back.held_back_since,
        held_back.route,
        held_back.http_status,
        held_back.read_from,
        held_back.why,
        as_of.as_of as warehouse_as_of,
        as_of.aged_at,
        as_of.night_note,
        case
            when loads.last_loaded_at is null then 'unknown'
            when loads.last_loaded_at < as_of.aged_at then 'behind'
            else 'current'
        end as freshness,
    from tables
    left join loads
        on loads.table_name = tables.table_name
    left join held_back
        on held_back.table_name = tables.table_name
    cross join as_of
),

final as (
    select
        *,
        case
            when held_back_since is null then null
            when route is not null
                then route || ' refused (' || http_status || ') since '
                    || strftime(timezone('UTC', held_back_since), '%Y-%m-%d')
            else regexp_replace(why, '^skipped: ', '') || ' since '
                || strftime(timezone('UTC', held_back_since), '%Y-%m-%d')
        end as reason,
    from joined
)

select
    *,
    case
        when freshness = 'unknown'
            then 'unknown (never loaded: '
                || concat_ws('; ', coalesce(reason, 'not read yet'), night_note) || ')'
        when freshness = 'behind'
            then 'as of ' || strftime(timezone('UTC', last_loaded_at), '%Y-%m-%d %H:%M') || ' UTC ('
                || age_label(last_loaded_at, aged_at) || ': '
                || concat_ws(
                    '; ',
                    case
                        when last_loaded_at < warehouse_as_of
                            then coalesce(reason, 'not read by the runs since')
                    end,
                    night_note
                )
                || ')'
    end as age_note,
from final
