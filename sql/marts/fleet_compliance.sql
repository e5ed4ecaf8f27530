-- materialized: table
-- fleet_compliance: described, with every column, in sql/marts/_marts.yml.
with

as_of as (
    select * from intermediate.int_devices_as_of
),

verdict_as_of as (
    select * from intermediate.int_verdict_as_of
),

checks as (
    -- the as_of day (filtered on a stored column, so the other days are never judged)
    select * from intermediate.int_device_day_checks
    where is_as_of_day
),

devices as (
    select * from intermediate.int_devices_current
    where not is_removed
),

targets as (
    select * from staging.stg_seeds__platform_targets
),

required_apps as (
    select * from staging.stg_seeds__required_apps
),

installed as (
    -- the required apps installed now (int_device_app_latest, required packages only)
    select * from intermediate.int_device_required_apps
),

blueprint_names as (
    select blueprint_id, any_value(blueprint_name) as blueprint_name,
    from staging.stg_esper__blueprints
    group by blueprint_id
),

blueprint_version_labels as (
    -- a version by its number (2.1), not its id; either list may lag the other
    select
        blueprint_version_id,
        max(
            cast(version_number as varchar)
            || coalesce('.' || cast(minor_version_number as varchar), '')
        ) as version_label,
    from (
        select blueprint_version_id, version_number, minor_version_number
        from staging.stg_esper__blueprint_versions
        union all
        select blueprint_version_id, version_number, minor_version_number
        from staging.stg_esper__blueprints
    )
    where blueprint_version_id is not null and version_number is not null
    group by blueprint_version_id
),

app_names as (
    select package_name, min(application_name) as app_name,
    from staging.stg_esper__applications
    where application_name is not null
    group by package_name
),

app_reasons as (
    -- the failing required apps of each device, in package order (sorted as (package, ...)
    -- structs: an ordered aggregate sorts per device and costs more)
    select
        checks.device_id as device_id,
        list_transform(
            list_sort(
                list(
                    {
                        'package_name': required_apps.package_name,
                        'detail': {
                            'reason_code': case
                                when installed.device_id is null then 'app_missing'
                                else 'app_outdated'
                            end,
                            'reason': 'required app '
                                || coalesce(
                                    coalesce(installed.app_name, app_names.app_name)
                                        || ' (' || required_apps.package_name || ')',
                                    required_apps.package_name
                                )
                                || case
                                    when installed.device_id is null then ' missing'
                                    else ' ' || coalesce(installed.version_name, '(no version)')
                                        || ' below minimum ' || required_apps.min_version
                                end,
                            'subject_id': required_apps.package_name,
                            'subject_name': coalesce(installed.app_name, app_names.app_name),
                            'observed': installed.version_name,
                            'target': required_apps.min_version,
                        },
                    }
                )
            ),
            app -> app.detail
        ) as app_reasons,
    from checks
    inner join required_apps
        on required_apps.platform = checks.platform
    left join installed
        on installed.device_id = checks.device_id
        and installed.package_name = required_apps.package_name
    left join app_names
        on app_names.package_name = required_apps.package_name
    where checks.apps_check = 'fail'
        and (
            installed.device_id is null
            or installed.version_key is null
            or installed.version_key < required_apps.min_version_key
        )
    group by checks.device_id
),

joined as (
    select
        as_of.as_of as as_of,
        verdict_as_of.data_as_of as data_as_of,
        verdict_as_of.age_note as age_note,
        devices.device_id as device_id,
        devices.device_name as device_name,
        devices.device_alias as device_alias,
        devices.serial_number as serial_number,
        devices.hardware_manufacturer as hardware_manufacturer,
        devices.hardware_model as hardware_model,
        devices.provisioned_at as enrolled_at,
        devices.created_at as created_at,
        devices.last_user_id as last_user_id,
        devices.last_user_name as last_user_name,
        devices.last_user_at as last_user_at,
        checks.platform as platform,
        devices.os as os,
        checks.os_version as os_version,
        checks.security_patch_level as security_patch_level,
        checks.security_patch_age_days as security_patch_age_days,
        checks.agent_version as agent_version,
        checks.group_id as group_id,
        devices.group_name as group_name,
        devices.group_path as group_path,
        checks.assigned_blueprint_id as assigned_blueprint_id,
        devices.assigned_blueprint_name as assigned_blueprint_name,
        checks.current_blueprint_id as current_blueprint_id,
        checks.current_blueprint_version_id as current_blueprint_version_id,
        checks.latest_blueprint_version_id as latest_blueprint_version_id,
        checks.blueprint_upgrade_status as blueprint_upgrade_status,
        devices.esper_drift_state as esper_drift_state,
        devices.esper_drift_state_name as esper_drift_state_name,
        devices.esper_drift_severity as esper_drift_severity,
        devices.is_esper_drifted as is_esper_drifted,
        devices.esper_security_state as esper_security_state,
        checks.last_seen_at as last_seen_at,
        checks.hours_since_seen as hours_since_seen,
        checks.last_seen_bucket as last_seen_bucket,
        checks.is_seen_recently as is_seen_recently,
        case checks.os_check when 'pass' then true when 'fail' then false end as is_os_current,
        case checks.patch_check when 'pass' then true when 'fail' then false end
            as is_security_patch_current,
        case checks.blueprint_check when 'pass' then true when 'fail' then false end
            as is_blueprint_in_sync,
        case checks.apps_check when 'pass' then true when 'fail' then false end as has_required_apps,
        case checks.agent_check when 'pass' then true when 'fail' then false end as is_agent_current,
        devices.device_state as device_state,
        checks.is_in_service as is_in_service,
        checks.verdict as verdict,
        list_concat(
            [
                case
                    when not checks.is_in_service then {
                        'reason_code': 'out_of_service',
                        'reason': 'device state ' || coalesce(devices.device_state_name, 'unknown')
                            || ' (' || coalesce(cast(devices.device_state as varchar), '?')
                            || '): not in service, not counted',
                        'subject_id': null, 'subject_name': null,
                        'observed': coalesce(devices.device_state_name, cast(devices.device_state as varchar)),
                        'target': null,
                    }
                end,
                case
                    when checks.last_seen_bucket = 'never_seen' then {
                        'reason_code': 'never_seen', 'reason': 'never seen',
                        'subject_id': null, 'subject_name': null, 'observed': null, 'target': null,
                    }
                    when not checks.is_seen_recently then {
                        'reason_code': 'not_seen_recently',
                        'reason': 'not seen for ' || cast(floor(checks.hours_since_seen / 24) as bigint)
                            || ' days (' || checks.last_seen_bucket || ')',
                        'subject_id': null, 'subject_name': null,
                        'observed': cast(checks.last_seen_at as varchar),
                        'target': checks.last_seen_bucket,
                    }
                end,
                case checks.os_check
                    when 'fail' then {
                        'reason_code': 'os_outdated',
                        'reason': 'OS ' || checks.os_version || ' below minimum '
                            || targets.min_os_version || ' for ' || checks.platform,
                        'subject_id': null, 'subject_name': null,
                        'observed': checks.os_version, 'target': targets.min_os_version,
                    }
                    when 'unknown' then {
                        'reason_code': 'os_not_reported', 'reason': 'OS version not reported',
                        'subject_id': null, 'subject_name': null, 'observed': null,
                        'target': targets.min_os_version,
                    }
                end,
                case checks.patch_check
                    when 'fail' then {
                        'reason_code': 'patch_too_old',
                        'reason': 'security patch ' || cast(checks.security_patch_level as varchar)
                            || ' is ' || checks.security_patch_age_days || ' days old (maximum '
                            || targets.max_security_patch_age_days || ')',
                        'subject_id': null, 'subject_name': null,
                        'observed': cast(checks.security_patch_level as varchar),
                        'target': cast(targets.max_security_patch_age_days as varchar),
                    }
                    when 'unknown' then {
                        'reason_code': 'patch_not_reported',
                        'reason': 'security patch level not reported',
                        'subject_id': null, 'subject_name': null, 'observed': null,
                        'target': cast(targets.max_security_patch_age_days as varchar),
                    }
                end,
                case
                    when checks.blueprint_check = 'fail' then {
                        'reason_code': 'blueprint_drift',
                        -- one reason per device, named as the console names it: the assigned
                        -- blueprint (else the applied one), then what is wrong with it
                        'reason': 'blueprint '
                            || coalesce(
                                devices.assigned_blueprint_name, checks.assigned_blueprint_id,
                                current_names.blueprint_name, checks.current_blueprint_id
                            )
                            || ': '
                            || concat_ws(
                                '; ',
                                case
                                    when checks.assigned_blueprint_id is null
                                        then 'applied, but none is assigned'
                                    when checks.is_blueprint_assignment_drift
                                        then 'assigned, but '
                                            || coalesce(current_names.blueprint_name, checks.current_blueprint_id, 'none')
                                            || ' is applied'
                                    when checks.is_blueprint_version_behind
                                        then 'at version '
                                            || coalesce(current_version.version_label, checks.current_blueprint_version_id, '(none)')
                                            || ', not the latest '
                                            || coalesce(latest_version.version_label, checks.latest_blueprint_version_id)
                                end,
                                case when checks.is_blueprint_upgrade_failed then 'upgrade failed' end
                            ),
                        'subject_id': coalesce(checks.assigned_blueprint_id, checks.current_blueprint_id),
                        'subject_name': case
                            when checks.assigned_blueprint_id is not null then devices.assigned_blueprint_name
                            else current_names.blueprint_name
                        end,
                        'observed': coalesce(current_version.version_label, checks.current_blueprint_version_id),
                        'target': coalesce(latest_version.version_label, checks.latest_blueprint_version_id),
                    }
                end,
                case checks.apps_check
                    when 'unknown' then {
                        'reason_code': 'apps_not_reported', 'reason': 'app inventory not reported',
                        'subject_id': null, 'subject_name': null, 'observed': null, 'target': null,
                    }
                end,
                case checks.agent_check
                    when 'fail' then {
                        'reason_code': 'agent_outdated',
                        'reason': 'Esper agent ' || checks.agent_version || ' below minimum '
                            || targets.min_agent_version,
                        'subject_id': null, 'subject_name': null,
                        'observed': checks.agent_version, 'target': targets.min_agent_version,
                    }
                    when 'unknown' then {
                        'reason_code': 'agent_not_reported',
                        'reason': 'Esper agent version not reported',
                        'subject_id': null, 'subject_name': null, 'observed': null,
                        'target': targets.min_agent_version,
                    }
                end,
            ],
            coalesce(app_reasons.app_reasons, [])
        ) as reasons_with_gaps,
    from checks
    cross join as_of
    cross join verdict_as_of
    inner join devices
        on devices.device_id = checks.device_id
    left join targets
        on targets.platform = checks.platform
    left join app_reasons
        on app_reasons.device_id = checks.device_id
    left join blueprint_names as current_names
        on current_names.blueprint_id = checks.current_blueprint_id
    left join blueprint_version_labels as current_version
        on current_version.blueprint_version_id = checks.current_blueprint_version_id
    left join blueprint_version_labels as latest_version
        on latest_version.blueprint_version_id = checks.latest_blueprint_version_id
),

final as (
    select
        * exclude (reasons_with_gaps, reason_details),
        list_transform(reason_details, detail -> detail.reason) as reasons,
        list_transform(reason_details, detail -> detail.reason_code) as reason_codes,
        reason_details,
    from (
        select
            *,
            list_filter(reasons_with_gaps, detail -> detail is not null) as reason_details,
        from joined
    )
)

select * from final
