-- Apple enrolment (DEP) tokens. The expiry (`meta.token_expiry_on`) has no declared format in
-- the API's spec: it is read as a timestamp where it parses, else NULL.
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

        -- timestamps
        try_cast(clean_text(meta__token_expiry_on) as timestamptz) as expires_at,
        try_cast(clean_text(created_at) as timestamptz) as created_at,
        try_cast(clean_text(updated_at) as timestamptz) as updated_at,

    from source
)

select * from renamed
