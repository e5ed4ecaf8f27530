-- materialized: table
-- Every package an app record can resolve to (device_apps' package name or bundle id, and the
-- tenant app catalogue's packages), once, with a number (package_no). A few dozen rows: marts
-- that group millions of app records per device and package (app_version_rollout) group on the
-- number, and, reading a table, DuckDB knows how small this side of their join is.
with

device_apps as (
    select * from staging.stg_esper__device_apps
),

tenant_apps as (
    select * from staging.stg_esper__tenant_apps
),

package_names as (
    select package_name
    from device_apps
    union
    select package_name
    from tenant_apps
),

final as (
    select
        package_name,
        row_number() over (order by package_name) as package_no,
    from package_names
    where package_name is not null
)

select * from final
