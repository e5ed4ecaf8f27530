-- app_rollout_current: described, with every column, in sql/marts/_marts.yml.
with

as_of as (
    select * from intermediate.int_devices_as_of
),

devices as (
    select * from intermediate.int_devices_current
    where not is_removed
),

installed as (
    select
        latest.*,
        devices.platform as platform,
    from intermediate.int_device_app_latest as latest
    inner join devices
        on devices.device_id = latest.device_id
),

required_apps as (
    select * from staging.stg_seeds__required_apps
),

reporting as (
    select
        platform,
        count(*) filter (where first_apps_reported_at is not null) as reporting_devices,
        count(*) filter (where first_apps_reported_at is null) as not_reporting_devices,
    from devices
    group by platform
),

per_version as (
    select
        platform,
        package_name,
        version_name,
        any_value(version_key) as version_key,
        count(distinct device_id) as devices,
    from installed
    group by platform, package_name, version_name
),

per_app as (
    select
        installed.platform as platform,
        installed.package_name as package_name,
        mode(installed.app_name) as app_name,
        count(distinct installed.device_id) as devices_with_app,
        max(installed.version_key) as latest_version_key,
    from installed
    group by installed.platform, installed.package_name
),

version_lists as (
    select
        per_version.platform as platform,
        per_version.package_name as package_name,
        count(*) as version_count,
        list(
            {'version_name': per_version.version_name, 'devices': per_version.devices}
            order by per_version.version_key desc nulls last, per_version.version_name
        ) as versions,
        arg_max(per_version.version_name, per_version.version_key) as latest_version,
        sum(per_version.devices) filter (
            where per_version.version_key = per_app.latest_version_key
        ) as devices_on_latest,
    from per_version
    inner join per_app
        on per_app.platform = per_version.platform
        and per_app.package_name = per_version.package_name
    group by per_version.platform, per_version.package_name
),

required_status as (
    select
        installed.platform as platform,
        installed.package_name as package_name,
        any_value(required_apps.min_version) as required_min_version,
        count(distinct installed.device_id) filter (
            where installed.version_key is null
                or installed.version_key < required_apps.min_version_key
        ) as devices_below_required,
    from installed
    inner join required_apps
        on required_apps.platform = installed.platform
        and required_apps.package_name = installed.package_name
    group by installed.platform, installed.package_name
),

final as (
    select
        as_of.as_of as as_of,
        as_of.data_as_of as data_as_of,
        as_of.age_note as age_note,
        per_app.platform as platform,
        per_app.package_name as package_name,
        per_app.app_name as app_name,
        version_lists.latest_version as latest_version,
        per_app.devices_with_app as devices_with_app,
        cast(coalesce(version_lists.devices_on_latest, 0) as bigint) as devices_on_latest,
        per_app.devices_with_app - cast(coalesce(version_lists.devices_on_latest, 0) as bigint)
            as devices_on_older,
        coalesce(reporting.reporting_devices, 0) as reporting_devices,
        coalesce(reporting.not_reporting_devices, 0) as not_reporting_devices,
        cast(coalesce(version_lists.devices_on_latest, 0) as double)
            / nullif(reporting.reporting_devices, 0) as share_on_latest,
        cast(per_app.devices_with_app as double) / nullif(reporting.reporting_devices, 0)
            as share_with_app,
        version_lists.version_count as version_count,
        version_lists.versions as versions,
        required_status.required_min_version as required_min_version,
        required_status.devices_below_required as devices_below_required,
        case
            when required_status.package_name is not null
                then coalesce(reporting.reporting_devices, 0) - per_app.devices_with_app
        end as devices_missing_required,
    from per_app
    cross join as_of
    inner join version_lists
        on version_lists.platform = per_app.platform
        and version_lists.package_name = per_app.package_name
    left join reporting
        on reporting.platform = per_app.platform
    left join required_status
        on required_status.platform = per_app.platform
        and required_status.package_name = per_app.package_name
)

select * from final
