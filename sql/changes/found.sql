-- The changes between the previous snapshot (changes.subject_states, changes.family_states at the
-- latest as-of before now) and now (states_now, families_now: subject_states.sql and
-- family_states.sql, built by pipelines/build/change_log.py): the rows appended to changes.change_log.
-- A family is compared only when the latest loaded run loaded it and the previous snapshot held
-- it loaded; otherwise one not_compared row says why. No previous snapshot: nothing (a first
-- load changes nothing).
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

families as (
    select
        families_now.family,
        families_now.family_label,
        families_now.is_current,
        families_now.reason,
        families_before.data_as_of as since,
        previous_at.as_of as previous_as_of,
        families_now.is_current
            and families_before.data_as_of is not null
            and families_now.data_as_of > families_before.data_as_of as is_compared,
    from families_now
    cross join previous_at
    left join families_before
        on families_before.family = families_now.family
    where previous_at.as_of is not null
),

compared as (
    select family, since from families
    where is_compared
),

before as (
    select subject_states.*
    from changes.subject_states
    inner join previous_at
        on previous_at.as_of = subject_states.as_of
    semi join compared
        on compared.family = subject_states.family
),

after as (
    select states_now.*
    from states_now
    semi join compared
        on compared.family = states_now.family
),

pairs as (
    select
        coalesce(after.family, before.family) as family,
        coalesce(after.subject_kind, before.subject_kind) as subject_kind,
        coalesce(after.subject_id, before.subject_id) as subject_id,
        coalesce(after.subject_name, before.subject_name) as subject_name,
        before.subject_id is not null as was_there,
        after.subject_id is not null as is_there,
        before.verdict as verdict_before,
        after.verdict as verdict_after,
        before.reasons as reasons_before,
        after.reasons as reasons_after,
        before.is_stale as was_stale,
        after.is_stale as is_stale,
        before.last_seen_bucket as bucket_before,
        after.last_seen_bucket as bucket_after,
        before.credential_status as credential_before,
        after.credential_status as credential_after,
        before.days_left as days_before,
        after.days_left as days_after,
        after.warning_days,
        after.urgent_days,
        before.run_status as run_status_before,
        after.run_status as run_status_after,
        coalesce(before.is_failing, false) as was_failing,
        after.is_failing,
        coalesce(before.is_stalled, false) as was_stalled,
        after.is_stalled,
        coalesce(before.is_ended, false) as was_ended,
        after.is_ended,
        before.version_name as version_before,
        after.version_name as version_after,
        before.version_key as version_key_before,
        after.version_key as version_key_after,
    from before
    full outer join after
        on after.subject_kind = before.subject_kind
        and after.subject_id = before.subject_id
),

device_changes as (
    select
        'became_non_compliant' as change,
        pairs.*,
        verdict_before as before,
        verdict_after as after,
        array_to_string(
            list_filter(reasons_after, r -> not list_contains(reasons_before, r)), '; '
        ) as reason,
    from pairs
    where subject_kind = 'device' and was_there and is_there
        and verdict_before <> 'non_compliant' and verdict_after = 'non_compliant'
    union all
    select
        'became_compliant',
        pairs.*,
        verdict_before,
        verdict_after,
        array_to_string(
            list_filter(reasons_before, r -> not list_contains(reasons_after, r)), '; '
        ),
    from pairs
    where subject_kind = 'device' and was_there and is_there
        and verdict_before <> 'compliant' and verdict_after = 'compliant'
    union all
    select
        'stopped_checking_in',
        pairs.*,
        bucket_before,
        bucket_after,
        null,
    from pairs
    where subject_kind = 'device' and was_there and is_there
        and not was_stale and is_stale
    union all
    select
        'checked_in_again',
        pairs.*,
        bucket_before,
        bucket_after,
        null,
    from pairs
    where subject_kind = 'device' and was_there and is_there
        and was_stale and not is_stale
    union all
    select
        'enrolled',
        pairs.*,
        null,
        verdict_after,
        null,
    from pairs
    where subject_kind = 'device' and is_there and not was_there
    union all
    select
        'removed',
        pairs.*,
        verdict_before,
        null,
        null,
    from pairs
    where subject_kind = 'device' and was_there and not is_there
),

credential_changes as (
    select
        'credential_expired' as change,
        pairs.*,
        days_before || ' days left' as before,
        credential_after as after,
        null as reason,
    from pairs
    where subject_kind = 'credential' and was_there and is_there
        and credential_before <> 'expired' and credential_after = 'expired'
    union all
    select
        'credential_expiring',
        pairs.*,
        days_before || ' days left',
        days_after || ' days left',
        case
            when days_before > urgent_days and days_after <= urgent_days
                then 'crossed ' || urgent_days || ' days left'
            else 'crossed ' || warning_days || ' days left'
        end,
    from pairs
    where subject_kind = 'credential' and was_there and is_there
        and credential_after <> 'expired'
        and (
            (days_before > warning_days and days_after <= warning_days)
            or (days_before > urgent_days and days_after <= urgent_days)
        )
),

run_changes as (
    select
        'pipeline_run_failing' as change,
        pairs.*,
        run_status_before as before,
        run_status_after as after,
        null as reason,
    from pairs
    where subject_kind = 'pipeline_run' and is_there and is_failing and not was_failing
    union all
    select
        'pipeline_run_stalled',
        pairs.*,
        run_status_before,
        run_status_after,
        null,
    from pairs
    where subject_kind = 'pipeline_run' and is_there and is_stalled and not was_stalled
    union all
    select
        'pipeline_run_ended',
        pairs.*,
        run_status_before,
        run_status_after,
        'ended ' || run_status_after,
    from pairs
    where subject_kind = 'pipeline_run' and is_there and is_ended and not was_ended
),

app_changes as (
    select
        'app_version_released' as change,
        pairs.*,
        version_before as before,
        version_after as after,
        null as reason,
    from pairs
    where subject_kind = 'app' and is_there
        and (version_key_before is null or version_key_after > version_key_before)
),

found as (
    select * from device_changes
    union all
    select * from credential_changes
    union all
    select * from run_changes
    union all
    select * from app_changes
),

not_compared as (
    select
        now_at.as_of,
        families.since,
        'not_compared' as change,
        families.family,
        'family' as subject_kind,
        families.family as subject_id,
        families.family_label as subject_name,
        null as before,
        null as after,
        case
            when not families.is_current
                then 'held back: ' || coalesce(families.reason, 'not loaded')
            else 'not loaded at ' || strftime(timezone('UTC', families.previous_as_of),
                '%Y-%m-%d %H:%M') || ' UTC'
        end as reason,
    from families
    cross join now_at
    where not families.is_compared
),

final as (
    select
        now_at.as_of,
        compared.since,
        found.change,
        found.family,
        found.subject_kind,
        found.subject_id,
        found.subject_name,
        found.before,
        found.after,
        nullif(found.reason, '') as reason,
    from found
    inner join compared
        on compared.family = found.family
    cross join now_at
    union all
    select * from not_compared
)

select * from final
