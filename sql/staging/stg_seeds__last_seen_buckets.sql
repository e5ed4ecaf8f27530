-- Typed last-seen buckets (sql/seeds/last_seen_buckets.csv).
with

source as (
    select * from seeds.last_seen_buckets
),

renamed as (
    select
        -- ids
        lower(clean_text(bucket)) as last_seen_bucket,

        -- thresholds
        cast(clean_text(max_hours) as double) as max_hours,

        -- booleans
        cast(clean_text(counts_as_seen) as boolean) as is_counted_as_seen,

    from source
    where clean_text(bucket) is not null
)

select * from renamed
