-- drift_disagreements: described, with every column, in sql/marts/_marts.yml.
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
