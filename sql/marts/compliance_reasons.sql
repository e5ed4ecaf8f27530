-- compliance_reasons: why each device is not compliant, one row per reason (a device with three
-- reasons has three rows; a compliant device none). The reasons of marts.fleet_compliance
-- (`reason_details`) laid out flat, with each code's label and kind from
-- sql/vocabulary/reason_codes.csv: group and count on reason_code, read the device's own values
-- in reason, observed and target.
--
-- Columns
--   as_of                        "now" the rules are judged at: the time the devices family (devices,
--                                history, heartbeats, installed apps) is as of
--                                (intermediate.int_devices_as_of); the latest loaded run's API time
--                                unless a run since could not read those tables
--   data_as_of                   the same time, NULL when the devices were never loaded
--   age_note                     how old that is, in the words every surface prints (NULL: loaded
--                                by the latest run; intermediate.int_family_freshness)
--   device_id, device_name       the device
--   platform, group_id, group_path   what and where it is
--   verdict                      its fleet_compliance verdict
--   reason_position              the reason's place in the device's list (1 = first)
--   reason_code                  stable code (sql/vocabulary/reason_codes.csv): out_of_service,
--                                never_seen, not_seen_recently, os_outdated, os_not_reported,
--                                patch_too_old, patch_not_reported, blueprint_drift,
--                                apps_not_reported, app_missing, app_outdated, agent_outdated,
--                                agent_not_reported
--   reason_label                 the code in a few words ("Security patch too old")
--   reason_kind                  state, seen, fail (makes the device non_compliant) or unknown
--   reason                       the device's reason in words, blueprints and apps by name
--   subject_id, subject_name     what the reason is about: the blueprint (assigned, else applied)
--                                for blueprint_drift, the app's package and name for app_missing
--                                and app_outdated; NULL for the others
--   observed                     the device's value as text: OS or agent version, patch level date,
--                                blueprint version number (2.0), installed app version, last seen
--                                time, state name; NULL when not reported
--   target                       the value it is judged against: the minimum version, the maximum
--                                patch age in days, the latest blueprint version, the bucket
with

compliance as (
    select * from marts.fleet_compliance
),

codes as (
    select * from seeds.reason_codes
),

reasons as (
    select
        as_of,
        data_as_of,
        age_note,
        device_id,
        device_name,
        platform,
        group_id,
        group_path,
        verdict,
        generate_subscripts(reason_details, 1) as reason_position,
        unnest(reason_details) as detail,
    from compliance
),

final as (
    select
        reasons.as_of as as_of,
        reasons.data_as_of as data_as_of,
        reasons.age_note as age_note,
        reasons.device_id as device_id,
        reasons.device_name as device_name,
        reasons.platform as platform,
        reasons.group_id as group_id,
        reasons.group_path as group_path,
        reasons.verdict as verdict,
        reasons.reason_position as reason_position,
        reasons.detail.reason_code as reason_code,
        codes.label as reason_label,
        codes.kind as reason_kind,
        reasons.detail.reason as reason,
        reasons.detail.subject_id as subject_id,
        reasons.detail.subject_name as subject_name,
        reasons.detail.observed as observed,
        reasons.detail.target as target,
    from reasons
    left join codes
        on codes.reason_code = reasons.detail.reason_code
)

select * from final
