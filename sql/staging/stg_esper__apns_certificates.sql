-- Apple push (APNs) certificates. The API names a certificate by its Apple ID; the expiry is
-- nested in `meta` (flattened and read by the loader: NULL when it cannot be read);
-- expires_as_served keeps it as served.
with

source as (
    select * from esper.apns_certificates
),

renamed as (
    select
        -- ids
        clean_text(id) as certificate_id,

        -- descriptors
        clean_text(apple_id) as apple_id,
        clean_text(meta__topic) as push_topic,
        upper(clean_text(state)) as upload_state,
        clean_text(json_extract_string(as_json(meta), '$.cert_expiry_on')) as expires_as_served,

        -- timestamps
        as_timestamptz(meta__cert_created_at) as issued_at,
        as_timestamptz(meta__cert_expiry_on) as expires_at,
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
