-- app_version_laggards: described, with every column, in sql/marts/_marts.yml.
with

latest_versions as (
    select * from marts.app_version_rollout
    where is_latest_version
),

installed as (
    select * from intermediate.int_device_app_latest
),

compliance as (
    select * from marts.fleet_compliance
),

final as (
    select
        latest_versions.as_of as as_of,
        latest_versions.data_as_of as data_as_of,
        latest_versions.age_note as age_note,
        compliance.device_id as device_id,
        compliance.device_name as device_name,
        compliance.group_name as group_name,
        compliance.group_path as group_path,
        compliance.platform as platform,
        installed.package_name as package_name,
        latest_versions.app_name as app_name,
        installed.version_name as installed_version,
        installed.installed_at as installed_at,
        latest_versions.version_name as latest_version,
        latest_versions.first_seen_at as latest_first_seen_at,
        compliance.last_seen_at as last_seen_at,
        compliance.last_seen_bucket as last_seen_bucket,
        compliance.verdict as verdict,
    from installed
    inner join compliance
        on compliance.device_id = installed.device_id
    inner join latest_versions
        on latest_versions.platform = compliance.platform
        and latest_versions.package_name = installed.package_name
    where installed.version_name is distinct from latest_versions.version_name
        and not coalesce(installed.version_key >= latest_versions.version_key, false)
)

select * from final
