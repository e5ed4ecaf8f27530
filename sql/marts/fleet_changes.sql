-- fleet_changes: described, with every column, in sql/marts/_marts.yml.
with

log as (
    select * from changes.change_log
),

kinds as (
    select * from seeds.change_kinds
),

final as (
    select
        log.change,
        kinds.label as change_label,
        cast(kinds.position as integer) as change_position,
        log.family,
        log.subject_kind,
        log.subject_id,
        log.subject_name,
        log.before,
        log.after,
        log.since,
        log.as_of,
        log.reason,
    from log
    left join kinds
        on kinds.change = log.change
)

select * from final
