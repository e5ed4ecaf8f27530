-- Apple enrolment (DEP) tokens. The expiry (`meta.token_expiry_on`) has no declared format in
-- the API's spec: the loader reads it (ISO 8601, a US date, epoch seconds or milliseconds) into
-- `token_expires_at`, NULL when it cannot; expires_as_served keeps the text as served.
with

source as (
    select * from esper.dep_tokens
),

renamed as (
    select
        -- ids
        clean_text(id) as token_id,

        -- descriptors
        clean_text(token_name) as token_name,
        upper(clean_text(state)) as upload_state,
        clean_text(meta__token_expiry_on) as expires_as_served,

        -- timestamps
        as_timestamptz(token_expires_at) as expires_at,
        try_cast(clean_text(created_at) as timestamptz) as created_at,
        try_cast(clean_text(updated_at) as timestamptz) as updated_at,

    from source
)

select * from renamed
