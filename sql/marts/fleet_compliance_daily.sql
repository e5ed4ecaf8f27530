-- materialized: table
-- fleet_compliance_daily: the compliance trend. One row per UTC day, group and platform, from the
-- first load to as_of, rebuilt from device history: each device is judged as it was at the end of
-- that day (same rules as fleet_compliance; the as_of day equals fleet_compliance).
--
-- Columns
--   day                          UTC calendar day (a change at 23:30 UTC-5 belongs to the next day)
--   group_id                     the group the device was in at the end of the day
--   group_path                   that group's path now (NULL if the group no longer exists)
--   platform                     ANDROID, APPLE, WINDOWS or LINUX
--   devices                      devices in service in the fleet that day (enrolled, not yet
--                                removed, state counted: see out_of_service_devices)
--   compliant_devices            verdict compliant at the end of the day
--   non_compliant_devices        verdict non_compliant
--   unverified_devices           verdict unverified (not seen recently, or a value not reported)
--   out_of_service_devices       devices disabled, provisioning, being wiped or onboarding that
--                                day (sql/vocabulary/device_states.csv): shown apart, in no rate
--   compliance_rate              compliant_devices / devices (unverified count against it); NULL
--                                when no device is in service
--   verified_compliance_rate     compliant_devices / (compliant + non_compliant); NULL when none
--   os_outdated_devices          devices in service failing the OS check that day (any verdict)
--   patch_outdated_devices       failing the security-patch age check
--   blueprint_drift_devices      failing the blueprint check
--   missing_required_apps_devices  failing the required-apps check
--   agent_outdated_devices       failing the agent version check
--   not_seen_recently_devices    devices whose last-seen bucket does not count as seen
--   data_as_of                   the time the row holds at: the end of the day, or for the last day
--                                the time the devices family is as of (intermediate.int_devices_as_of)
with

checks as (
    select * from intermediate.int_device_day_checks
),

groups as (
    select * from staging.stg_esper__groups
),

daily as (
    select
        checks.day as day,
        checks.group_id as group_id,
        checks.platform as platform,
        count(*) filter (where checks.is_in_service) as devices,
        count(*) filter (where checks.verdict = 'compliant') as compliant_devices,
        count(*) filter (where checks.verdict = 'non_compliant') as non_compliant_devices,
        count(*) filter (where checks.verdict = 'unverified') as unverified_devices,
        count(*) filter (where not checks.is_in_service) as out_of_service_devices,
        count(*) filter (where checks.is_in_service and checks.os_check = 'fail')
            as os_outdated_devices,
        count(*) filter (where checks.is_in_service and checks.patch_check = 'fail')
            as patch_outdated_devices,
        count(*) filter (where checks.is_in_service and checks.blueprint_check = 'fail')
            as blueprint_drift_devices,
        count(*) filter (where checks.is_in_service and checks.apps_check = 'fail')
            as missing_required_apps_devices,
        count(*) filter (where checks.is_in_service and checks.agent_check = 'fail')
            as agent_outdated_devices,
        count(*) filter (where checks.is_in_service and not checks.is_seen_recently)
            as not_seen_recently_devices,
    from checks
    group by checks.day, checks.group_id, checks.platform
),

final as (
    select
        daily.day as day,
        daily.group_id as group_id,
        groups.group_path as group_path,
        daily.platform as platform,
        daily.devices as devices,
        daily.compliant_devices as compliant_devices,
        daily.non_compliant_devices as non_compliant_devices,
        daily.unverified_devices as unverified_devices,
        daily.out_of_service_devices as out_of_service_devices,
        cast(daily.compliant_devices as double) / nullif(daily.devices, 0) as compliance_rate,
        cast(daily.compliant_devices as double)
            / nullif(daily.compliant_devices + daily.non_compliant_devices, 0)
            as verified_compliance_rate,
        daily.os_outdated_devices as os_outdated_devices,
        daily.patch_outdated_devices as patch_outdated_devices,
        daily.blueprint_drift_devices as blueprint_drift_devices,
        daily.missing_required_apps_devices as missing_required_apps_devices,
        daily.agent_outdated_devices as agent_outdated_devices,
        daily.not_seen_recently_devices as not_seen_recently_devices,
        least(utc_day_end(daily.day), as_of.as_of) as data_as_of,
    from daily
    cross join (select as_of from intermediate.int_devices_as_of) as as_of
    left join groups
        on groups.group_id = daily.group_id
)

select * from final
