-- Last-seen buckets: the seed names only the fixed buckets (online, active, stale, offline,
-- missing: the models name them), and every device in a mart sits in one of them or in
-- never_seen.
select
    'seed last_seen_buckets.csv: bucket ' || coalesce(last_seen_bucket, '(empty)')
    || ' is not one of online, active, stale, offline, missing (the names are fixed; edit '
    || 'max_hours to move a boundary)' as problem
from staging.stg_seeds__last_seen_buckets
where last_seen_bucket not in ('online', 'active', 'stale', 'offline', 'missing')

union all

select
    'marts.fleet_compliance: device ' || device_id || ' has last_seen_bucket '
    || coalesce(last_seen_bucket, 'NULL') as problem
from marts.fleet_compliance
where last_seen_bucket is null
    or last_seen_bucket not in ('online', 'active', 'stale', 'offline', 'missing', 'never_seen')

union all

select
    'marts.stale_devices: device ' || device_id || ' has last_seen_bucket '
    || coalesce(last_seen_bucket, 'NULL') as problem
from marts.stale_devices
where last_seen_bucket is null
    or last_seen_bucket not in ('stale', 'offline', 'missing', 'never_seen')
