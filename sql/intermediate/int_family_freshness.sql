-- materialized: table
-- The as-of of each table family (seeds.table_families): the "now" every clock rule over the
-- family's tables is judged at (a run that could not read them does not move it), and the words
-- every surface prints of a number drawn from them. Read by the marts (data_as_of, age_note),
-- marts.headlines and `status`'s freshness block.
--
-- Columns
--   family, family_label   the family (int_table_freshness)
--   data_as_of             the oldest last_loaded_at of the family's tables: the time its data is
--                          as of; NULL when one of them was never loaded (then it is unknown)
--   last_whole_load_at     the oldest last_whole_load_at of its tables (no part refused); NULL
--                          when one of them was never loaded whole (another's is not the family's)
--   warehouse_as_of        the warehouse's "now" (intermediate.int_as_of)
--   aged_at                the time its age counts to (int_as_of.aged_at): later than
--                          warehouse_as_of when runs since the latest loaded one loaded nothing
--   is_known               data_as_of is not NULL
--   is_behind              data_as_of is older than aged_at (after a failed night, every family)
--   is_held_back           behind by more than freshness_warn_after_hours() (sql/macros) because runs
--                          since were refused it (not because none read it): a warning in
--                          `status`, which then exits 7
--   held_back_by           the family's tables older than aged_at, or never loaded,
--                          comma-separated (NULL: none)
--   held_back_since        when the refusal that holds it back began (API time)
--   reason                 why it is behind or unknown: '<route> refused (<status>) since <day>',
--                          the run's words for a refusal that is no route's answer (a Data Tap
--                          quota), 'not read by the runs since' (runs that did not read it: a
--                          selection, a full-scan-only table), 'not read yet'; then, after runs
--                          that loaded nothing, int_as_of.night_note ('the run of 2026-10-04 00:00
--                          UTC failed'), joined by '; '
--   age_note               what a surface prints beside a number drawn from the family: NULL when
--                          current; 'as of 2026-10-03 00:00 UTC (3 days old: <reason>)' when behind;
--                          'unknown (never loaded: <reason>)' when never loaded
with

tables as (
    select * from intermediate.int_table_freshness
),

-- the refusal a family is behind for: the first, of a table not skipped for another's sake
causes as (
    select
        family,
        arg_min(reason, (read_from is not null, held_back_since, table_name)) as reason,
        min(held_back_since) as held_back_since,
    from tables
    where held_back_since is not null
    group by family
),

families as (
    select
        family,
        any_value(family_label) as family_label,
        case when bool_and(last_loaded_at is not null) then min(last_loaded_at) end as data_as_of,
        case
            when bool_and(last_whole_load_at is not null) then min(last_whole_load_at)
        end as last_whole_load_at,
        any_value(warehouse_as_of) as warehouse_as_of,
        any_value(aged_at) as aged_at,
        any_value(night_note) as night_note,
        string_agg(table_name, ', ' order by table_name)
            filter (where freshness <> 'current') as held_back_by,
    from tables
    group by family
),

final as (
    select
        families.family,
        families.family_label,
        families.data_as_of,
        families.last_whole_load_at,
        families.warehouse_as_of,
        families.aged_at,
        families.data_as_of is not null as is_known,
        coalesce(families.data_as_of < families.aged_at, false) as is_behind,
        coalesce(
            causes.reason is not null
            and families.data_as_of
                < families.warehouse_as_of - to_hours(freshness_warn_after_hours()),
            false
        ) as is_held_back,
        families.held_back_by,
        causes.held_back_since,
        case
            when families.held_back_by is null then null
            else concat_ws(
                '; ',
                case
                    when causes.reason is not null then causes.reason
                    when families.data_as_of is null then 'not read yet'
                    when families.data_as_of < families.warehouse_as_of
                        then 'not read by the runs since'
                end,
                families.night_note
            )
        end as reason,
    from families
    left join causes
        on causes.family = families.family
)

select
    *,
    case
        when not is_known then 'unknown (never loaded: ' || reason || ')'
        when is_behind
            then 'as of ' || strftime(timezone('UTC', data_as_of), '%Y-%m-%d %H:%M') || ' UTC ('
                || age_label(data_as_of, aged_at) || ': ' || reason || ')'
    end as age_note,
from final
