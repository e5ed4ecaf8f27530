-- How each pipeline run treated each raw table it read (bookkeeping `_esper_runs.tables`): one row
-- per run and table. Runs recorded before the column existed have no rows here
-- (intermediate.int_table_freshness reads them from `unavailable`).
-- treatment: loaded (read whole), partial (loaded; some parts refused keep older rows), kept (a
--   table kept as an earlier run loaded it: its parts refused, nothing newer loaded), skipped (its
--   route, or the table it is read from, refused).
with

source as (
    select * from esper._esper_runs
    where tables is not null
),

entries as (
    select
        run_id,
        unnest(map_entries(cast(as_json(tables) as map(varchar, json)))) as entry,
    from source
),

renamed as (
    select
        -- ids
        clean_text(run_id) as run_id,
        clean_text(entry.key) as table_name,

        -- descriptors
        lower(clean_text(entry.value ->> 'treatment')) as treatment,
        clean_text(entry.value ->> 'route') as route,
        clean_text(entry.value ->> 'read_from') as read_from,
        clean_text(entry.value ->> 'why') as why,

        -- numerics
        try_cast(entry.value ->> 'status' as integer) as http_status,

    from entries
)

select * from renamed
