-- How old a compliance verdict is, one row: the oldest of the families it reads
-- (intermediate.int_verdict_families), in the words of intermediate.int_family_freshness. The
-- clock rules are still judged at the devices' own as-of (intermediate.int_devices_as_of): a
-- held-back catalogue makes the verdict older, not the device's last check-in.
--
-- Columns
--   data_as_of   the oldest data_as_of of those families; NULL when one was never loaded
--   age_note     each family behind or unknown, '<label>: <age_note>' joined by '; '; NULL when
--                all are current
with

verdict as (
    select * from intermediate.int_verdict_families
),

families as (
    select * from intermediate.int_family_freshness
),

final as (
    select
        case when bool_and(families.is_known) then min(families.data_as_of) end as data_as_of,
        string_agg(families.family_label || ': ' || families.age_note, '; '
            order by families.family) as age_note,
    from verdict
    inner join families
        on families.family = verdict.family
)

select * from final
