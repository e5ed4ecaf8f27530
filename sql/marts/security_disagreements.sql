-- security_disagreements: described, with every column, in sql/marts/_marts.yml.
with

compliance as (
    select * from marts.fleet_compliance
),

states as (
    select
        upper(trim(state)) as state,
        cast(is_at_risk as boolean) as is_esper_at_risk,
        esper_reason,
    from seeds.security_states
),

targets as (
    select * from staging.stg_seeds__platform_targets
),

judged as (
    select
        compliance.*,
        states.is_esper_at_risk as is_esper_at_risk,
        states.esper_reason as esper_reason,
        targets.max_security_patch_age_days as max_security_patch_age_days,
        case
            when compliance.esper_security_state is not null and states.state is null
                then 'esper_state_unknown'
            when states.is_esper_at_risk and compliance.is_security_patch_current
                then 'esper_only'
            when not states.is_esper_at_risk and not compliance.is_security_patch_current
                then 'ours_only'
        end as disagreement,
    from compliance
    left join states
        on states.state = upper(compliance.esper_security_state)
    left join targets
        on targets.platform = compliance.platform
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
        esper_security_state,
        is_esper_at_risk,
        esper_reason,
        security_patch_level,
        security_patch_age_days,
        max_security_patch_age_days,
        is_security_patch_current,
        verdict,
        concat_ws(
            '; ',
            case
                when is_security_patch_current
                    then 'security patch ' || cast(security_patch_level as varchar) || ' is '
                        || security_patch_age_days || ' days old, within the maximum '
                        || max_security_patch_age_days
            end,
            nullif(array_to_string(
                list_transform(
                    list_filter(reason_details, detail -> detail.reason_code like 'patch_%'),
                    detail -> detail.reason
                ),
                '; '
            ), ''),
            'verdict ' || verdict,
            nullif(array_to_string(
                list_transform(
                    list_filter(reason_details, detail -> detail.reason_code not like 'patch_%'),
                    detail -> detail.reason
                ),
                '; '
            ), '')
        ) as our_reason,
        disagreement,
    from judged
    where disagreement is not null
)

select * from final
