-- The targets name platforms that exist: ANDROID, APPLE, WINDOWS, LINUX, or a platform a current
-- device reports. A misspelt platform (ANDRIOD) would otherwise switch its targets off silently.
with

known (platform) as (
    values ('ANDROID'), ('APPLE'), ('WINDOWS'), ('LINUX')
    union
    select distinct platform from intermediate.int_devices_current where platform is not null
)

select
    'seed compliance_platform_targets.csv: platform ' || platform
    || ' is not one of ANDROID, APPLE, WINDOWS, LINUX, nor a platform any device reports'
    as problem
from staging.stg_seeds__platform_targets
where platform not in (select platform from known)

union all

select
    'seed compliance_required_apps.csv: platform ' || platform || ' (app ' || package_name
    || ') is not one of ANDROID, APPLE, WINDOWS, LINUX, nor a platform any device reports'
    as problem
from staging.stg_seeds__required_apps
where platform not in (select platform from known)
