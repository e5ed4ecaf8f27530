-- materialized: table
-- fleet_compliance_daily: described, with every column, in sql/marts/_marts.yml.
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
