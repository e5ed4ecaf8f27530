-- The app versions installed on each device now: one row per device and package, from the rows
-- still valid (valid_to NULL). If two rows are open for the same package, the latest valid_from
-- wins. A rolled-back app shows the version it was rolled back to (the latest row, not the
-- highest version).
with

app_versions as (
    select * from intermediate.int_device_app_versions
),

latest as (
    select *
    from app_versions
    where is_current
    qualify row_number() over (
        partition by device_id, package_name
        order by valid_from desc, version_key desc
    ) = 1
)

select * from latest
