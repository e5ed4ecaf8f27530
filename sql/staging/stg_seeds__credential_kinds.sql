-- Typed credential kinds (sql/vocabulary/credential_kinds.csv): the warning threshold of each kind.
with

source as (
    select * from seeds.credential_kinds
),

renamed as (
    select
        -- ids
        lower(clean_text(kind)) as credential_kind,

        -- thresholds
        cast(clean_text(warning_days) as integer) as warning_days,
        cast(clean_text(urgent_days) as integer) as urgent_days,

        -- descriptors
        clean_text(stops_when_expired) as stops_when_expired,

    from source
    where clean_text(kind) is not null
)

select * from renamed
