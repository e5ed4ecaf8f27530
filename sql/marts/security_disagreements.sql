-- security_disagreements: the devices where Esper's security verdict and the warehouse's disagree.
-- One row per current device whose two verdicts differ (agreeing devices, and devices either side
-- does not judge, are left out).
--
-- Esper rates an Android device from Google's integrity verdicts and the age of its security
-- patch (security_state on /v2/devices/); the warehouse judges the patch age against the
-- platform's target (fleet_compliance.is_security_patch_current, the one check both make) and
-- cannot see integrity. Neither is wrong by construction: a row is a device to look at.
--
-- Columns
--   as_of, data_as_of, age_note  as in fleet_compliance (the devices family's time)
--   device_id, device_name, platform, group_name, group_path   as in fleet_compliance
--   is_in_service                the device's state counts in compliance (fleet_compliance)
--   esper_security_state         Esper's verdict, as served (SECURE, LOW_RISK, MEDIUM_RISK,
--                                HIGH_RISK)
--   is_esper_at_risk             Esper rates the device at risk (any *_RISK state); NULL: a state
--                                sql/vocabulary/security_states.csv does not know
--   esper_reason                 Esper's reason, in words (sql/vocabulary/security_states.csv: the
--                                project's reading of Esper's documents); NULL for an unknown state
--   security_patch_level, security_patch_age_days   the device's patch and its age at as_of
--   max_security_patch_age_days  the platform's target (sql/seeds/compliance_platform_targets.csv)
--   is_security_patch_current    the warehouse's security check (fleet_compliance)
--   verdict                      the warehouse's compliance verdict (fleet_compliance)
--   our_reason                   the warehouse's reason, in words: the patch check's reason when
--                                it fails, else what it found ("security patch ... is N days old,
--                                within the maximum M"), then the verdict and its other reasons
--   disagreement                 esper_only: Esper rates the device at risk while it passes the
--                                warehouse's security patch check (`verdict` says whether the
--                                warehouse calls it compliant);
--                                ours_only: Esper rates it SECURE while it fails the warehouse's
--                                security patch check;
--                                esper_state_unknown: a state the vocabulary does not know
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
