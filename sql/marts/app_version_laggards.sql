-- app_version_laggards: who is left on an older version. One row per current device and app
-- (package_name) whose installed version is below the app's latest version on the device's
-- platform (marts.app_version_rollout, is_latest_version): the devices that row counts in
-- devices_on_older.
--
-- Columns
--   as_of, data_as_of, age_note  as in app_version_rollout (the devices family's time)
--   device_id, device_name, group_name, group_path   as in fleet_compliance
--   platform                     the device's platform
--   package_name, app_name       the app
--   installed_version            the version the device has now (int_device_app_latest)
--   installed_at                 when the device installed it (int_device_app_versions.installed_at)
--   latest_version               the latest version on the platform (is_latest_version)
--   latest_first_seen_at         that version's first appearance in the fleet
--   last_seen_at, last_seen_bucket, verdict   the device's last check-in and compliance verdict
--                                (fleet_compliance): a device not seen cannot update
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
