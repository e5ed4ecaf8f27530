-- drift_disagreements: the devices where Esper's own drift verdict and the warehouse's blueprint
-- check disagree. One row per current device whose two verdicts differ (agreeing devices, and
-- devices either side does not judge, are left out).
--
-- Esper judges the device's settings against its blueprint (drift_state on /v2/devices/); the
-- warehouse judges blueprint ids and versions (fleet_compliance.is_blueprint_in_sync). Neither is
-- wrong by construction: a row is a device to look at in the console.
--
-- Columns
--   as_of                        "now" the rules are judged at: the time the devices family (devices,
--                                history, heartbeats, installed apps) is as of
--                                (intermediate.int_devices_as_of); the latest loaded run's API time
--                                unless a run since could not read those tables
--   data_as_of                   the same time, NULL when the devices were never loaded
--   age_note                     how old that is, in the words every surface prints (NULL: loaded
--                                by the latest run; intermediate.int_family_freshness)
--   device_id, device_name, platform, group_name, group_path   as in fleet_compliance
--   is_in_service                the device's state counts in compliance (fleet_compliance)
--   assigned_blueprint_id, assigned_blueprint_name, current_blueprint_id,
--   current_blueprint_version_id, latest_blueprint_version_id, blueprint_upgrade_status
--                                the blueprint facts the warehouse's check reads
--   esper_drift_state            Esper's drift code, as served
--   esper_drift_state_name       its name (sql/vocabulary/drift_states.csv) or the code as text
--   esper_drift_severity         Esper's drift severity, as served
--   is_esper_drifted             Esper's verdict (NULL: a code the vocabulary does not know)
--   is_blueprint_in_sync         the warehouse's verdict (fleet_compliance)
--   disagreement                 esper_only: Esper reports drift, the blueprint check passes
--                                (a settings drift the warehouse cannot see);
--                                ours_only: the blueprint check fails (assigned and current
--                                blueprints differ, the version is behind, or the upgrade failed)
--                                and Esper reports the device in sync;
--                                esper_code_unknown: Esper serves a drift code the vocabulary does
--                                not know (add it to sql/vocabulary/drift_states.csv)
--   blueprint_reasons            the warehouse's blueprint reasons (fleet_compliance.reasons whose
--                                code is blueprint_drift)
with

compliance as (
    select * from marts.fleet_compliance
),

judged as (
    select
        *,
        case
            when esper_drift_state is not null and is_esper_drifted is null
                then 'esper_code_unknown'
            when is_esper_drifted and is_blueprint_in_sync then 'esper_only'
            when not is_esper_drifted and not is_blueprint_in_sync then 'ours_only'
        end as disagreement,
    from compliance
),

final as (
    select
        as_of,
        data_as_of,
        age_note,
        device_id,
        device_name,
        platform,
        group_name,
        group_path,
        is_in_service,
        assigned_blueprint_id,
        assigned_blueprint_name,
        current_blueprint_id,
        current_blueprint_version_id,
        latest_blueprint_version_id,
        blueprint_upgrade_status,
        esper_drift_state,
        esper_drift_state_name,
        esper_drift_severity,
        is_esper_drifted,
        is_blueprint_in_sync,
        disagreement,
        list_transform(
            list_filter(reason_details, detail -> detail.reason_code = 'blueprint_drift'),
            detail -> detail.reason
        ) as blueprint_reasons,
    from judged
    where disagreement is not null
)

select * from final
