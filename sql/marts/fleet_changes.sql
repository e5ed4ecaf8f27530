-- fleet_changes: what changed overnight. One row per change a build found between the previous
-- loaded as-of and its own (changes.change_log, appended by pipelines/change_log.py from
-- sql/changes/found.sql), kept across nights: "this week" is a filter on as_of. A family a change
-- is judged in (devices, credentials, Pipelines, catalogues) is compared only where both as-ofs
-- loaded it; otherwise one not_compared row per family says why, never "no change".
--
-- Columns
--   change          what changed (sql/vocabulary/change_kinds.csv): became_non_compliant (the
--                   fleet_compliance verdict was not non_compliant, is now), became_compliant
--                   (was not compliant, is now), stopped_checking_in (not in marts.stale_devices
--                   before, in it now), checked_in_again (the reverse), enrolled (in
--                   fleet_compliance now, not before), removed (was, is not: left the fleet as
--                   the warehouse knows it), credential_expiring (crossed its kind's warning_days
--                   or urgent_days left, credential_kinds.csv), credential_expired,
--                   pipeline_run_failing and pipeline_run_stalled (the marts.pipeline_rollout
--                   flags, newly set on the run), pipeline_run_ended (ended since, with its
--                   outcome), app_version_released (a higher current version of an app in the
--                   catalogue, or a new app), not_compared (a family was not compared)
--   change_label    the change in words (change_kinds.csv label): what every surface prints
--   change_position its place in the order every surface lists the changes in
--   family          the table family the change is judged in (seeds.table_families)
--   subject_kind    device, credential (id: <kind>:<id>), pipeline_run, app, or family
--   subject_id      the device, credential, Pipeline run, app or family
--   subject_name    its name as the API serves it (a run: "<pipeline> #<run number>"; a family:
--                   its label)
--   before, after   the state before and after: a verdict, a last-seen bucket, "<n> days left",
--                   a run status, a version (NULL: not there)
--   since           the earlier as-of: the time the family's data was as of at the previous
--                   snapshot (for not_compared: its last compared as-of)
--   as_of           the later as-of: the warehouse's as-of (intermediate.int_as_of) of the build
--                   that found the change
--   reason          the reasons that appeared (became_non_compliant) or went (became_compliant),
--                   the threshold crossed (credential_expiring), the outcome
--                   (pipeline_run_ended), why a family was not compared; else NULL
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
