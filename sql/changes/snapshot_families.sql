-- The families' snapshot kept for the next night: a current family as it is now; one not current
-- keeps its previous snapshot's as-of (its states are carried with it: snapshot_states.sql), so
-- the next comparison runs from its last loaded state.
with

now_at as (
    select as_of from intermediate.int_as_of
),

previous_at as (
    select as_of from temp.previous_at
),

families_before as (
    select family_states.*
    from changes.family_states
    inner join previous_at
        on previous_at.as_of = family_states.as_of
),

final as (
    select
        now_at.as_of,
        families_now.family,
        families_now.family_label,
        case
            when families_now.is_current then families_now.data_as_of
            else families_before.data_as_of
        end as data_as_of,
        families_now.is_current,
        families_now.reason,
    from families_now
    cross join now_at
    left join families_before
        on families_before.family = families_now.family
)

select * from final
