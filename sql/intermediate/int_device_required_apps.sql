-- The required apps (seeds, any platform) installed on each device now: the rows of
-- int_device_app_latest whose package is required, with the same rule (rows still valid; the
-- latest valid_from wins, then the highest version_key). Ranks only the required packages' rows
-- (a few per device) instead of every installed app: fleet_compliance reads this model.
-- tests/sql/test_spine_equivalence.py checks it equals int_device_app_latest on those packages.
with

app_versions as (
    select * from intermediate.int_device_app_versions
),

required_packages as (
    select distinct package_name
    from staging.stg_seeds__required_apps
),

latest as (
    select app_versions.*
    from app_versions
    inner join required_packages
        on required_packages.package_name = app_versions.package_name
    where app_versions.is_current
    qualify row_number() over (
        partition by app_versions.device_id, app_versions.package_name
        order by app_versions.valid_from desc, app_versions.version_key desc
    ) = 1
)

select * from latest
