-- credential_expiry: every credential or profile whose expiry stops part of the fleet's
-- management, with the days it has left. One row per credential: when the API lists one id
-- twice, the loader keeps the copy that expires first (sources/esper/tables/credentials.py).
--
-- Columns
--   as_of               "now" days_left and status are judged at: the time the credential's own
--                       table (certificates, DEP tokens, VPP tokens, profiles) was last loaded
--                       (intermediate.int_table_freshness), never a newer "now" a run reached
--                       without reading it
--   data_as_of          the same time (NULL: never loaded; then the table has no rows)
--   age_note            how old that is, in the words every surface prints (NULL: current)
--   credential_kind     apns_certificate, dep_token, vpp_token or provisioning_profile
--   credential_id       the API's id of the certificate, token or profile
--   credential_name     Apple ID (certificates), token name, profile name; NULL for VPP tokens
--                       (the API gives them no name)
--   expires_at          when it expires, read from ISO 8601, a US date (month first), or epoch
--                       seconds or milliseconds (NULL: the API gave no date, or none of these
--                       reads it; always NULL for VPP tokens, whose expiry the API does not
--                       declare: check Apple Business Manager)
--   expires_as_served   the expiry as the API served it (NULL: none; always NULL for VPP tokens)
--   days_left           whole days from as_of to expires_at, rounded toward zero (negative:
--                       expired that many whole days ago; 0: expires, or expired, within a day)
--   status              expired (expires_at <= as_of), expiring (days_left <= warning_days of its
--                       kind, sql/vocabulary/credential_kinds.csv, 30 by default), ok,
--                       unreadable (an expiry was served but cannot be read: check it by hand),
--                       or unknown (no expiry served)
--   warning_days        the threshold of its kind
--   stops_when_expired  what stops working when it expires
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
