-- The tenant's status counters (GET /v2/enterprise/{eid}/report/status-metrics), one row per day
-- of the API's clock: the last run of a day wins. Counts of devices, as the API computes them.
with

source as (
    select * from esper.status_metrics
),

renamed as (
    select
        -- ids
        cast(snapshot_date as date) as snapshot_date,

        -- numerics: devices
        cast(recently_added as bigint) as recently_added_devices,
        cast(low_battery as bigint) as low_battery_devices,
        cast(under_provisioning as bigint) as under_provisioning_devices,
        cast(unprovisioned_devices as bigint) as unprovisioned_devices,
        cast(secure as bigint) as secure_devices,
        cast(low_risk as bigint) as low_risk_devices,
        cast(medium_risk as bigint) as medium_risk_devices,
        cast(high_risk as bigint) as high_risk_devices,
        cast(total_devices_under_risk as bigint) as devices_under_risk,
        cast(unspecified as bigint) as unspecified_risk_devices,
        cast(last_seen__first_period as bigint) as last_seen_first_period_devices,
        cast(last_seen__second_period as bigint) as last_seen_second_period_devices,
        cast(last_seen__third_period as bigint) as last_seen_third_period_devices,

        -- timestamps
        as_timestamptz(as_of) as measured_at,

    from source
)

select * from renamed
