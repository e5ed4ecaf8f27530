-- Every known version of every device: device_history plus the current devices rows (so a device
-- is known even when its history row is late), one row per device and updated_at; the current
-- row wins a tie (it carries the freshest last_seen).
with

history as (
    select
        *,
        1 as source_rank,
    from staging.stg_esper__device_history
),

current_rows as (
    select
        *,
        0 as source_rank,
    from staging.stg_esper__devices
),

unioned as (
    select * from current_rows
    union all by name
    select * from history
),

deduplicated as (
    select * exclude (source_rank)
    from unioned
    where device_id is not null
        and updated_at is not null
    qualify row_number() over (partition by device_id, updated_at order by source_rank) = 1
)

select * from deduplicated
