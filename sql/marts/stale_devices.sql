-- stale_devices: described, with every column, in sql/marts/_marts.yml.
with

compliance as (
    select * from marts.fleet_compliance
),

final as (
    select
        as_of,
        data_as_of,
        age_note,
        device_id,
        device_name,
        device_alias,
        serial_number,
        platform,
        os_version,
        group_id,
        group_name,
        group_path,
        last_seen_bucket,
        last_seen_at,
        hours_since_seen,
        cast(floor(hours_since_seen / 24) as integer) as days_since_seen,
        verdict,
    from compliance
    where last_seen_bucket not in ('online', 'active')
)

select * from final
