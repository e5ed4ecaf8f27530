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

platform_numbers as (
    select
        platform,
        row_number() over () as platform_no,
    from (select distinct platform from all_devices)
    where platform is not null
),

device_numbers as (
    -- the big groupings and joins below compare numbers, not ids, names and BIGINT[6] keys:
    -- a number per device, platform, package and version name, and each version key's rank
    -- (NULL: no key). Integer keys and states are what keep the per-device groupings cheap
    select
        all_devices.device_id as device_id,
        platform_numbers.platform_no as platform_no,
        all_devices.is_removed as is_removed,
        row_number() over () as device_no,
    from all_devices
    left join platform_numbers
        on platform_numbers.platform = all_devices.platform
    -- never NULL (int_devices_current): the filter lowers DuckDB's estimate of this side below
    -- its estimate of the app records, so it builds the join's hash table here (150,000 rows),
    -- not on the millions of app records
    where all_devices.device_id is not null
),

package_numbers as (
    select * from intermediate.int_app_packages
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
        device_numbers.platform_no as platform_no,
        package_numbers.package_no as package_no,
        version_numbers.version_no as version_no,
        version_numbers.key_rank as key_rank,
        app_versions.app_name as app_name,
        app_versions.installed_at as installed_at,
        app_versions.is_current and not device_numbers.is_removed as is_open_now,
        -- the order of int_device_app_latest (the latest valid_from, then the highest version
        -- key; no key is lowest) as one number: microseconds since the epoch, then the key's rank
        cast(epoch_us(app_versions.valid_from) as hugeint) * 4294967296
            + coalesce(version_numbers.key_rank, 0) as latest_order,
    from intermediate.int_device_app_versions as app_versions
    inner join device_numbers
        on device_numbers.device_id = app_versions.device_id
    inner join package_numbers
        on package_numbers.package_name = app_versions.package_name
    left join version_numbers
        on version_numbers.version_name = app_versions.version_name
),

installs as (
    -- each device's first install of each version it has held; its records' lowest and highest
    -- app name (fixed-size states, which DuckDB can spill: a list or a mode per group could not)
    select
        device_no,
        package_no,
        version_no,
        any_value(platform_no) as platform_no,
        any_value(key_rank) as key_rank,
        min(app_name) as app_name_low,
        max(app_name) as app_name_high,
        min(installed_at) as installed_at,
    from app_records
    group by device_no, package_no, version_no
),

mixed_names as (
    -- the few devices whose records of a version name the app differently: their most frequent
    -- name (mode)
    select
        app_records.device_no as device_no,
        app_records.package_no as package_no,
        app_records.version_no as version_no,
        mode(app_records.app_name) as app_name,
    from app_records
    semi join installs
        on installs.device_no = app_records.device_no
        and installs.package_no = app_records.package_no
        and installs.version_no is not distinct from app_records.version_no
        and installs.app_name_low is distinct from installs.app_name_high
    group by app_records.device_no, app_records.package_no, app_records.version_no
),

versions as (
    select
        installs.platform_no as platform_no,
        installs.package_no as package_no,
        installs.version_no as version_no,
        any_value(installs.key_rank) as key_rank,
        -- the mode of each device's name for it
        mode(coalesce(mixed_names.app_name, installs.app_name_low)) as app_name,
        min(installs.installed_at) as first_seen_at,
    from installs
    left join mixed_names
        on mixed_names.device_no = installs.device_no
        and mixed_names.package_no = installs.package_no
        and mixed_names.version_no is not distinct from installs.version_no
    group by installs.platform_no, installs.package_no, installs.version_no
),

install_times as (
    select
        versions.platform_no as platform_no,
        versions.package_no as package_no,
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
        on installs.platform_no = versions.platform_no
        and installs.package_no = versions.package_no
        and installs.version_no is not distinct from versions.version_no
    group by versions.platform_no, versions.package_no, versions.version_no
),

current_installs as (
    -- one row per current device and app (int_device_app_latest's grain): the version of its
    -- latest open record, by int_device_app_latest's order
    select
        device_no,
        package_no,
        any_value(platform_no) as platform_no,
        arg_max(version_no, latest_order) as version_no,
    from app_records
    where is_open_now
    group by device_no, package_no
),

current_versions as (
    -- current devices on each version now
    select
        current_installs.platform_no as platform_no,
        current_installs.package_no as package_no,
        current_installs.version_no as version_no,
        any_value(version_numbers.key_rank) as key_rank,
        count(*) as devices,
    from current_installs
    left join version_numbers
        on version_numbers.version_no = current_installs.version_no
    group by current_installs.platform_no, current_installs.package_no, current_installs.version_no
),

with_app as (
    select
        platform_no,
        package_no,
        cast(sum(devices) as bigint) as devices_with_app,
        max(key_rank) as latest_key_rank,
    from current_versions
    group by platform_no, package_no
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
        versions.platform_no as platform_no,
        versions.package_no as package_no,
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
        on current_versions.platform_no = versions.platform_no
        and current_versions.package_no = versions.package_no
    group by versions.platform_no, versions.package_no, versions.version_no
),

reached_by as (
    -- each current device with the app, for each version it has reached: its earliest install of
    -- that version or a higher one; a device on a higher version before this one appeared
    -- adopted it at its first appearance
    select
        versions.platform_no as platform_no,
        versions.package_no as package_no,
        versions.version_no as version_no,
        installs.device_no as device_no,
        greatest(min(installs.installed_at), any_value(versions.first_seen_at)) as adopted_at,
    from versions
    inner join installs
        on installs.platform_no = versions.platform_no
        and installs.package_no = versions.package_no
        and (
            installs.version_no is not distinct from versions.version_no
            or installs.key_rank >= versions.key_rank
        )
    semi join current_installs
        on current_installs.device_no = installs.device_no
        and current_installs.package_no = installs.package_no
    group by versions.platform_no, versions.package_no, versions.version_no, installs.device_no
),

adoption as (
    -- the times the devices that have reached each version adopted it, earliest first
    select
        platform_no,
        package_no,
        version_no,
        list(adopted_at order by adopted_at) as adopted_times,
    from reached_by
    group by platform_no, package_no, version_no
),

reached as (
    -- the time the ceil(50 %) and ceil(90 %) device of devices_with_app adopted the version
    -- (NULL: fewer devices have reached it)
    select
        adoption.platform_no as platform_no,
        adoption.package_no as package_no,
        adoption.version_no as version_no,
        adoption.adopted_times[cast(ceil(0.5 * with_app.devices_with_app) as bigint)]
            as reached_50_pct_at,
        adoption.adopted_times[cast(ceil(0.9 * with_app.devices_with_app) as bigint)]
            as reached_90_pct_at,
    from adoption
    inner join with_app
        on with_app.platform_no = adoption.platform_no
        and with_app.package_no = adoption.package_no
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
        platform_numbers.platform as platform,
        package_numbers.package_name as package_name,
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
    left join platform_numbers
        on platform_numbers.platform_no = versions.platform_no
    left join package_numbers
        on package_numbers.package_no = versions.package_no
    left join version_numbers
        on version_numbers.version_no = versions.version_no
    left join install_times
        on install_times.platform_no = versions.platform_no
        and install_times.package_no = versions.package_no
        and install_times.version_no is not distinct from versions.version_no
    left join with_app
        on with_app.platform_no = versions.platform_no
        and with_app.package_no = versions.package_no
    left join now_counts
        on now_counts.platform_no = versions.platform_no
        and now_counts.package_no = versions.package_no
        and now_counts.version_no is not distinct from versions.version_no
    left join reached
        on reached.platform_no = versions.platform_no
        and reached.package_no = versions.package_no
        and reached.version_no is not distinct from versions.version_no
    left join reporting
        on reporting.platform = platform_numbers.platform
    left join catalogue_versions
        on catalogue_versions.package_name = package_numbers.package_name
        and catalogue_versions.version_name = version_numbers.version_name
)

select * from final
