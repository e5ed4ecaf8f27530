-- credential_expiry: described, with every column, in sql/marts/_marts.yml.
with

-- the time each credential's table was last loaded: its days are counted from there
as_of as (
    select
        table_name,
        last_loaded_at as as_of,
        age_note,
    from intermediate.int_table_freshness
    where family = 'credentials'
),

kinds as (
    select * from staging.stg_seeds__credential_kinds
),

credentials as (
    select 'apns_certificate' as credential_kind, certificate_id as credential_id,
        apple_id as credential_name, expires_at, expires_as_served,
        'apns_certificates' as table_name,
    from staging.stg_esper__apns_certificates
    union all
    select 'dep_token', token_id, token_name, expires_at, expires_as_served, 'dep_tokens'
    from staging.stg_esper__dep_tokens
    union all
    select 'vpp_token', token_id, null, null, null, 'vpp_tokens'
    from staging.stg_esper__vpp_tokens
    union all
    select 'provisioning_profile', profile_id, profile_name, expires_at, expires_as_served,
        'provisioning_profiles'
    from staging.stg_esper__provisioning_profiles
),

final as (
    select
        as_of.as_of,
        as_of.as_of as data_as_of,
        as_of.age_note,
        credentials.credential_kind,
        credentials.credential_id,
        credentials.credential_name,
        credentials.expires_at,
        credentials.expires_as_served,
        cast(trunc(epoch(credentials.expires_at - as_of.as_of) / 86400) as integer) as days_left,
        case
            when credentials.expires_at is null and credentials.expires_as_served is not null
                then 'unreadable'
            when credentials.expires_at is null then 'unknown'
            when credentials.expires_at <= as_of.as_of then 'expired'
            when credentials.expires_at - as_of.as_of <= to_days(kinds.warning_days) then 'expiring'
            else 'ok'
        end as status,
        kinds.warning_days,
        kinds.stops_when_expired,
    from credentials
    left join as_of
        on as_of.table_name = credentials.table_name
    left join kinds
        on credentials.credential_kind = kinds.credential_kind
)

select * from final
