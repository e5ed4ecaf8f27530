-- The subjects' snapshot kept for the next night: a current family's subjects as they are now,
-- a family not current keeps its previous snapshot's (see snapshot_families.sql).
with

now_at as (
    select as_of from intermediate.int_as_of
),

previous_at as (
    select as_of from temp.previous_at
),

current_families as (
    select family from families_now
    where is_current
),

kept as (
    select subject_states.* exclude (as_of)
    from changes.subject_states
    inner join previous_at
        on previous_at.as_of = subject_states.as_of
    anti join current_families
        on current_families.family = subject_states.family
),

fresh as (
    select states_now.*
    from states_now
    semi join current_families
        on current_families.family = states_now.family
),

final as (
    select now_at.as_of, fresh.* from fresh
    cross join now_at
    union all
    select now_at.as_of, kept.* from kept
    cross join now_at
)

select * from final
