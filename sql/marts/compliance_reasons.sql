-- compliance_reasons: described, with every column, in sql/marts/_marts.yml.
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
