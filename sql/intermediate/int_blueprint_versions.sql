-- Published blueprint versions with the time each became available (published_at): versions
-- from blueprint_versions (their created_at), plus each blueprint's latest version from
-- blueprints (its updated_at) in case the versions list lags. "The blueprint's latest version at
-- time t" = the version with the latest published_at <= t.
with

versions as (
    select
        blueprint_id,
        blueprint_version_id,
        blueprint_name,
        version_number,
        minor_version_number,
        coalesce(created_at, updated_at) as published_at,
        1 as source_rank,
    from staging.stg_esper__blueprint_versions
    where coalesce(is_published, true)
),

latest_from_blueprints as (
    select
        blueprint_id,
        blueprint_version_id,
        blueprint_name,
        version_number,
        minor_version_number,
        coalesce(updated_at, created_at) as published_at,
        2 as source_rank,
    from staging.stg_esper__blueprints
    where coalesce(is_published, true)
),

unioned as (
    select * from versions
    union all
    select * from latest_from_blueprints
),

deduplicated as (
    select * exclude (source_rank)
    from unioned
    where blueprint_id is not null
        and blueprint_version_id is not null
        and published_at is not null
    qualify row_number() over (
        partition by blueprint_id, blueprint_version_id
        order by source_rank
    ) = 1
)

select * from deduplicated
