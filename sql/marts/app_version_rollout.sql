-- materialized: table
-- app_version_rollout: described, with every column, in sql/marts/_marts.yml.
with

as_of as (
    select * from intermediate.int_devices_as_of
),

all_devices as (
    select * from intermediate.int_devices_current
),

devices as (
    select * from all_devices
    where not is_removed
),

device_numbers as (
    -- the big groupings and joins below compare numbers, not ids, names and BIGINT[6] keys:
    -- a number per device, per version name, and each version key's rank (NULL: no key)
    select
        device_id,
        platform,
        is_removed,
        row_number() over () as device_no,
    from all_devices
),

version_numbers as (
    select
        version_name,
        version_key,
        row_number() over () as version_no,
        case
            when version_key is not null then dense_rank() over (order by version_key)
        end as key_rank,
    from intermediate.int_app_version_keys
),

app_records as materialized (
    -- every record of an app on a device, in numbers (the device gives the platform)
    select
        device_numbers.device_no as device_no,
        device_numbers.platform as platform,
        app_versions.package_name as package_name,
        version_numbers.version_no as version_no,
        version_numbers.key_rank as key_rank,
        app_versions.app_name as app_name,
        app_versions.installed_at as installed_at,
    from intermediate.int_device_app_versions as app_versions
    inner join device_numbers
        on device_numbers.device_id = app_versions.device_id
    left join version_numbers
        on version_numbers.version_name = app_versions.version_name
),

installs as (
    -- each device's first install of each version it has held; its records' lowest and highest
    -- app name (fixed-size states, which DuckDB can spill: a list or a mode per group could not)
    select
        device_no,
        package_name,
        version_no,
        any_value(platform) as platform,
        any_value(key_rank) as key_rank,
        min(app_name) as app_name_low,
        max(app_name) as app_name_high,
        min(installed_at) as installed_at,
    from app_records
    group by device_no, package_name, version_no
),

mixed_names as (
    -- the few devices whose records of a version name the app differently: their most frequent
    -- name (mode)
    select
        app_records.device_no as device_no,
        app_records.package_name as package_name,
        app_records.version_no as version_no,
        mode(app_records.app_name) as app_name,
    from app_records
    semi join installs
        on installs.device_no = app_records.device_no
        and installs.package_name = app_records.package_name
        and installs.version_no is not distinct from app_records.version_no
        and installs.app_name_low is distinct from installs.app_name_high
    group by app_records.device_no, app_records.package_name, app_records.version_no
),

versions as (
    select
        installs.platform as platform,
        installs.package_name as package_name,
        installs.version_no as version_no,
        any_value(installs.key_rank) as key_rank,
        -- the mode of each device's name for it
        mode(coalesce(mixed_names.app_name, installs.app_name_low)) as app_name,
        min(installs.installed_at) as first_seen_at,
    from installs
    left join mixed_names
        on mixed_names.device_no = installs.device_no
        and mixed_names.package_name = installs.package_name
        and mixed_names.version_no is not distinct from installs.version_no
    group by installs.platform, installs.package_name, installs.version_no
),

install_times as (
    select
        versions.platform as platform,
        versions.package_name as package_name,
        versions.version_no as version_no,
        -- minutes from the microseconds since the epoch: the same double as epoch() of the
        -- interval, without building an interval per install
        quantile_cont(
            (epoch_us(installs.installed_at) - epoch_us(versions.first_seen_at)) / 1000000.0 / 60.0,
            0.5
        ) as p50_minutes_to_install,
        quantile_cont(
            (epoch_us(installs.installed_at) - epoch_us(versions.first_seen_at)) / 1000000.0 / 60.0,
            0.9
        ) as p90_minutes_to_install,
        count(*) as devices_installed,
    from versions
    inner join installs
        on installs.platform = versions.platform
        and installs.package_name = versions.package_name
        and installs.version_no is not distinct from versions.version_no
    group by versions.platform, versions.package_name, versions.version_no
),

current_installs as (
    -- one row per current device and app (int_device_app_latest's grain)
    select
        device_numbers.device_no as device_no,
        device_numbers.platform as platform,
        latest.package_name as package_name,
        version_numbers.version_no as version_no,
        version_numbers.key_rank as key_rank,
    from intermediate.int_device_app_latest as latest
    inner join device_numbers
        on device_numbers.device_id = latest.device_id
        and not device_numbers.is_removed
    left join version_numbers
        on version_numbers.version_name = latest.version_name
),

current_versions as (
    -- current devices on each version now
    select
        platform,
        package_name,
        version_no,
        any_value(key_rank) as key_rank,
        count(*) as devices,
    from current_installs
    group by platform, package_name, version_no
),

with_app as (
    select
        platform,
        package_name,
        cast(sum(devices) as bigint) as devices_with_app,
        max(key_rank) as latest_key_rank,
    from current_versions
    group by platform, package_name
),

reporting as (
    select
        platform,
        count(*) filter (where first_apps_reported_at is not null) as reporting_devices,
    from devices
    group by platform
),

now_counts as (
    select
        versions.platform as platform,
        versions.package_name as package_name,
        versions.version_no as version_no,
        cast(sum(current_versions.devices) filter (
            where current_versions.version_no is not distinct from versions.version_no
        ) as bigint) as devices_on_version,
        cast(sum(current_versions.devices) filter (
            where current_versions.version_no is not distinct from versions.version_no
                or current_versions.key_rank >= versions.key_rank
        ) as bigint) as devices_at_or_above,
    from versions
    inner join current_versions
        on current_versions.platform = versions.platform
        and current_versions.package_name = versions.package_name
    group by versions.platform, versions.package_name, versions.version_no
),

reached_by as (
    -- each current device with the app, for each version it has reached: its earliest install of
    -- that version or a higher one; a device on a higher version before this one appeared
    -- adopted it at its first appearance
    select
        versions.platform as platform,
        versions.package_name as package_name,
        versions.version_no as version_no,
        installs.device_no as device_no,
        greatest(min(installs.installed_at), any_value(versions.first_seen_at)) as adopted_at,
    from versions
    inner join installs
        on installs.platform = versions.platform
        and installs.package_name = versions.package_name
        and (
            installs.version_no is not distinct from versions.version_no
            or installs.key_rank >= versions.key_rank
        )
    semi join current_installs
        on current_installs.device_no = installs.device_no
        and current_installs.package_name = installs.package_name
    group by versions.platform, versions.package_name, versions.version_no, installs.device_no
),

adoption as (
    -- the times the devices that have reached each version adopted it, earliest first
    select
        platform,
        package_name,
        version_no,
        list(adopted_at order by adopted_at) as adopted_times,
    from reached_by
    group by platform, package_name, version_no
),

reached as (
    -- the time the ceil(50 %) and ceil(90 %) device of devices_with_app adopted the version
    -- (NULL: fewer devices have reached it)
    select
        adoption.platform as platform,
        adoption.package_name as package_name,
        adoption.version_no as version_no,
        adoption.adopted_times[cast(ceil(0.5 * with_app.devices_with_app) as bigint)]
            as reached_50_pct_at,
        adoption.adopted_times[cast(ceil(0.9 * with_app.devices_with_app) as bigint)]
            as reached_90_pct_at,
    from adoption
    inner join with_app
        on with_app.platform = adoption.platform
        and with_app.package_name = adoption.package_name
),

catalogue as (
    -- the tenant catalogue's versions, by package and by name or code as devices report them
    select
        applications.package_name as package_name,
        unnest([application_versions.release_name, application_versions.version_code])
            as version_name,
        application_versions.created_at as created_at,
    from staging.stg_esper__application_versions as application_versions
    inner join staging.stg_esper__applications as applications
        on applications.application_id = application_versions.application_id
    union all
    select
        tenant_apps.package_name,
        unnest([tenant_app_versions.version_name, tenant_app_versions.version_code]),
        tenant_app_versions.created_at,
    from staging.stg_esper__tenant_app_versions as tenant_app_versions
    inner join staging.stg_esper__tenant_apps as tenant_apps
        on tenant_apps.tenant_app_id = tenant_app_versions.tenant_app_id
),

catalogue_versions as (
    select
        package_name,
        version_name,
        min(created_at) as catalogue_created_at,
    from catalogue
    where version_name is not null
    group by package_name, version_name
),

final as (
    select
        as_of.as_of as as_of,
        as_of.data_as_of as data_as_of,
        as_of.age_note as age_note,
        versions.platform as platform,
        versions.package_name as package_name,
        versions.app_name as app_name,
        version_numbers.version_name as version_name,
        version_numbers.version_key as version_key,
        coalesce(versions.key_rank = with_app.latest_key_rank, false) as is_latest_version,
        versions.first_seen_at as first_seen_at,
        utc_date(versions.first_seen_at) as first_seen_day,
        catalogue_versions.catalogue_created_at as catalogue_created_at,
        coalesce(now_counts.devices_on_version, 0) as devices_on_version,
        coalesce(now_counts.devices_at_or_above, 0) as devices_at_or_above,
        coalesce(with_app.devices_with_app, 0) - coalesce(now_counts.devices_at_or_above, 0)
            as devices_on_older,
        coalesce(with_app.devices_with_app, 0) as devices_with_app,
        coalesce(reporting.reporting_devices, 0) as reporting_devices,
        cast(coalesce(now_counts.devices_on_version, 0) as double)
            / nullif(reporting.reporting_devices, 0) as share_of_reporting,
        cast(coalesce(now_counts.devices_at_or_above, 0) as double)
            / nullif(with_app.devices_with_app, 0) as share_at_or_above,
        round(epoch(reached.reached_50_pct_at - versions.first_seen_at) / 86400.0, 1)
            as days_to_50_pct,
        round(epoch(reached.reached_90_pct_at - versions.first_seen_at) / 86400.0, 1)
            as days_to_90_pct,
        install_times.p50_minutes_to_install as p50_minutes_to_install,
        install_times.p90_minutes_to_install as p90_minutes_to_install,
        install_times.devices_installed as devices_installed,
    from versions
    cross join as_of
    left join version_numbers
        on version_numbers.version_no = versions.version_no
    left join install_times
        on install_times.platform = versions.platform
        and install_times.package_name = versions.package_name
        and install_times.version_no is not distinct from versions.version_no
    left join with_app
        on with_app.platform = versions.platform
        and with_app.package_name = versions.package_name
    left join now_counts
        on now_counts.platform = versions.platform
        and now_counts.package_name = versions.package_name
        and now_counts.version_no is not distinct from versions.version_no
    left join reached
        on reached.platform = versions.platform
        and reached.package_name = versions.package_name
        and reached.version_no is not distinct from versions.version_no
    left join reporting
        on reporting.platform = versions.platform
    left join catalogue_versions
        on catalogue_versions.package_name = versions.package_name
        and catalogue_versions.version_name = version_numbers.version_name
)

select * from final
