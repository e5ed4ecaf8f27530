-- Apple app licence (VPP) tokens. The API declares no name, state or expiry for them, and the
-- token itself (`key`) is never loaded: this view says which tokens exist and when they changed.
with

source as (
    select * from esper.vpp_tokens
),

renamed as (
    select
        -- ids
        clean_text(id) as token_id,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
