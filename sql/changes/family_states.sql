-- Each family a change is judged in (seeds.change_kinds.family), now: its as-of, whether the
-- latest loaded run loaded it (is_current: only then is it compared), and why not.
with

kinds as (
    select distinct family from seeds.change_kinds
    where family is not null
),

freshness as (
    select * from intermediate.int_family_freshness
),

final as (
    select
        freshness.family,
        freshness.family_label,
        freshness.data_as_of,
        freshness.is_known and not freshness.is_behind as is_current,
        freshness.reason,
    from freshness
    semi join kinds
        on kinds.family = freshness.family
)

select * from final
