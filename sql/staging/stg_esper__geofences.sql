-- Geofences: where devices may be. Legacy records link the enterprise by URL.
with

source as (
    select * from esper.geofences
),

renamed as (
    select
        -- ids
        clean_text(id) as geofence_id,
        ref_id(enterprise) as enterprise_id,

        -- descriptors
        clean_text(name) as geofence_name,
        clean_text(description) as description,
        clean_text(created_by) as created_by,
        device_actions,

        -- numerics
        cast(latitude as double) as latitude,
        cast(longitude as double) as longitude,
        cast(radius as integer) as radius,
        upper(clean_text(radius_unit)) as radius_unit,
        cast(device_count as integer) as device_count,

        -- timestamps
        as_timestamptz(created_on) as created_at,
        as_timestamptz(updated_on) as updated_at,

    from source
)

select * from renamed
