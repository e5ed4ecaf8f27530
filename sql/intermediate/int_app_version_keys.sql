-- materialized: table
-- Every version string an installed app can carry (version_name or version_code, from
-- device_apps and the tenant app catalogue), once, with its version_key (compared part by part as
-- numbers, see the version_key macro). A few dozen rows: int_device_app_versions, a view over
-- millions of app rows, looks the keys up here instead of parsing each row.
with

device_apps as (
    select * from staging.stg_esper__device_apps
),

tenant_app_versions as (
    select * from staging.stg_esper__tenant_app_versions
),

version_strings as (
    select unnest([version_name, version_code]) as version_name
    from device_apps
    union
    select unnest([version_name, version_code]) as version_name
    from tenant_app_versions
),

final as (
    select
        version_name,
        version_key(version_name) as version_key,
    from version_strings
    where version_name is not null
)

select * from final
