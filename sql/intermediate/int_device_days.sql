-- materialized: table
-- The device x day spine: what each device looked like at the end of each UTC day it belonged to
-- the fleet (int_device_spans). cutoff_at = the last instant of the day, or as_of for the as_of
-- day, so the as_of row is the device as it is now. Attributes come from the latest version with
-- updated_at <= cutoff_at; last_seen_at from the latest heartbeat <= cutoff_at and the version's
-- own last_seen (when <= cutoff_at). Days are UTC whatever the session TimeZone.
with

as_of as (
    select * from intermediate.int_as_of
),

spans as (
    select * from intermediate.int_device_spans
),

versions as (
    select * from intermediate.int_device_versions
),

heartbeats as (
    select
        device_id,
        seen_at,
    from staging.stg_esper__heartbeats
    where device_id is not null
        and seen_at is not null
),

spine as (
    select
        device_id,
        cast(unnest(generate_series(first_day, last_day, interval 1 day)) as date) as day,
    from spans
),

with_cutoff as (
    select
        spine.device_id as device_id,
        spine.day as day,
        least(utc_day_end(spine.day), as_of.as_of) as cutoff_at,
    from spine
    cross join as_of
),

version_picked as (
    -- narrow rows through the as-of joins; attributes are joined back afterwards
    select
        with_cutoff.device_id as device_id,
        with_cutoff.day as day,
        with_cutoff.cutoff_at as cutoff_at,
        version_keys.updated_at as version_updated_at,
    from with_cutoff
    asof join (select device_id, updated_at from versions) as version_keys
        on version_keys.device_id = with_cutoff.device_id
        and version_keys.updated_at <= with_cutoff.cutoff_at
),

heartbeat_picked as (
    select
        version_picked.*,
        heartbeats.seen_at as heartbeat_at,
    from version_picked
    asof left join heartbeats
        on heartbeats.device_id = version_picked.device_id
        and heartbeats.seen_at <= version_picked.cutoff_at
),

final as (
    select
        picked.device_id as device_id,
        picked.day as day,
        picked.cutoff_at as cutoff_at,
        versions.platform as platform,
        versions.os_version as os_version,
        versions.os_version_key as os_version_key,
        versions.group_id as group_id,
        versions.security_patch_level as security_patch_level,
        versions.agent_version as agent_version,
        versions.agent_version_key as agent_version_key,
        versions.assigned_blueprint_id as assigned_blueprint_id,
        versions.current_blueprint_id as current_blueprint_id,
        versions.current_blueprint_version_id as current_blueprint_version_id,
        versions.blueprint_upgrade_status as blueprint_upgrade_status,
        picked.version_updated_at as version_updated_at,
        greatest(
            picked.heartbeat_at,
            case when versions.last_seen_at <= picked.cutoff_at then versions.last_seen_at end
        ) as last_seen_at,
    from heartbeat_picked as picked
    inner join versions
        on versions.device_id = picked.device_id
        and versions.updated_at = picked.version_updated_at
)

select * from final
