-- The latest published version of each blueprint from each moment on. Versions come from
-- blueprint_versions (available from their created_at), plus each blueprint's latest version from
-- blueprints (its updated_at) in case the versions list lags. One row per blueprint and moment a
-- version became available (published_at); blueprint_version_id is the HIGHEST version
-- (version_number, then minor_version_number) available by then. "The blueprint's latest version
-- at time t" = the row with the latest published_at <= t. Ordering by version number, not by time,
-- keeps the answer deterministic when several versions share one timestamp.
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
),

timeline as (
    -- every version published at or before this one's time, the highest of them
    select
        blueprint_id,
        published_at,
        arg_max(blueprint_version_id, [version_number, minor_version_number]) over (
            partition by blueprint_id
            order by published_at
            range between unbounded preceding and current row
        ) as blueprint_version_id,
    from deduplicated
),

latest_by_moment as (
    select distinct
        timeline.blueprint_id,
        timeline.published_at,
        timeline.blueprint_version_id,
    from timeline
)

select
    latest_by_moment.blueprint_id,
    latest_by_moment.blueprint_version_id,
    deduplicated.blueprint_name,
    deduplicated.version_number,
    deduplicated.minor_version_number,
    latest_by_moment.published_at,
from latest_by_moment
inner join deduplicated
    on deduplicated.blueprint_id = latest_by_moment.blueprint_id
    and deduplicated.blueprint_version_id = latest_by_moment.blueprint_version_id
