-- pipeline_rollout: described, with every column, in sql/marts/_marts.yml.
with recursive

runs as (
    select * from staging.stg_esper__pipeline_runs
),

listed_stages as (
    select * from staging.stg_esper__pipeline_stages
),

stage_runs as (
    select * from staging.stg_esper__pipeline_stage_runs
),

target_runs as (
    select * from staging.stg_esper__pipeline_target_runs
),

-- the time the Pipelines tables are as of: their clocks (stalled, hours taken) are judged there,
-- never at a newer "now" a run reached without reading them
as_of as (
    select
        data_as_of as as_of,
        age_note,
    from intermediate.int_family_freshness
    where family = 'pipelines'
),

-- a stage's place: the spec gives stages no order field, and a list may come back in any order.
-- A stage run starts only once the one before it ended, so the runs that reached a stage tell
-- its place (its earliest place among a run's stage runs, by start); stages no run reached
-- follow, in list order
reached_places as (
    select
        stage_id,
        row_number() over (
            partition by pipeline_run_id order by started_at, stage_run_id
        ) as place,
    from stage_runs
),

stages as (
    select
        listed_stages.* exclude (stage_order),
        row_number() over (
            partition by listed_stages.pipeline_id
            order by places.place nulls last, listed_stages.stage_order, listed_stages.stage_id
        ) as stage_order,
    from listed_stages
    left join (
        select stage_id, min(place) as place from reached_places group by stage_id
    ) as places on places.stage_id = listed_stages.stage_id
),

per_stage_run as (
    select
        stage_run_id,
        count(*) as target_devices,
        count(*) filter (where status = 'success') as succeeded_devices,
        count(*) filter (where status in ('failure', 'invalid')) as failed_devices,
        count(*) filter (where status = 'timeout') as timed_out_devices,
        count(*) filter (where status = 'cancelled') as cancelled_devices,
        count(*) filter (
            where status in ('pending', 'queued', 'processing', 'dispatched', 'running', 'complete')
        ) as in_progress_devices,
        max(updated_at) as last_target_change_at,
    from target_runs
    group by stage_run_id
),

-- the newest change anywhere in a run: the run, its stage runs, their target runs
run_changes as (
    select
        runs.pipeline_run_id,
        -- each part coalesced: on other engines `greatest` is NULL when any argument is
        greatest(
            any_value(runs.updated_at),
            coalesce(max(stage_runs.updated_at), any_value(runs.updated_at)),
            coalesce(max(per_stage_run.last_target_change_at), any_value(runs.updated_at))
        ) as last_change_at,
    from runs
    left join stage_runs on stage_runs.pipeline_run_id = runs.pipeline_run_id
    left join per_stage_run on per_stage_run.stage_run_id = stage_runs.stage_run_id
    group by runs.pipeline_run_id
),

failures as (
    select
        target_runs.stage_run_id,
        coalesce(statuses.reason, target_runs.command_reason, '(no reason given)') as reason,
        coalesce(devices.device_name, target_runs.device_alias, target_runs.device_id)
            as device_name,
    from target_runs
    left join staging.stg_esper__command_statuses as statuses
        on statuses.command_request_id = target_runs.command_id
        and statuses.device_id = target_runs.device_id
    left join intermediate.int_devices_current as devices
        on devices.device_id = target_runs.device_id
    where target_runs.status in ('failure', 'invalid', 'timeout')
),

reasons as (
    select
        stage_run_id,
        reason,
        count(*) as devices,
        list(device_name order by device_name)[1:3] as device_names,
    from failures
    group by stage_run_id, reason
),

top_reasons as (
    select
        stage_run_id,
        list(
            {'reason': reason, 'devices': devices, 'device_names': device_names}
            order by devices desc, reason
        )[1:3] as top_failure_reasons,
    from reasons
    group by stage_run_id
),

planned_operations as (
    select
        stage_id,
        string_agg(distinct operation_type, ', ' order by operation_type) as operation_type,
        min(json_extract_string(args, '$.package_name'))
            filter (where operation_type = 'INSTALL') as package_name,
    from staging.stg_esper__pipeline_stage_operations
    group by stage_id
),

planned_targets as (
    select
        stage_id,
        string_agg(
            distinct lower(target_list_type), ', ' order by lower(target_list_type)
        ) as target_type,
        count(*) as planned_targets,
    from staging.stg_esper__pipeline_stage_targets
    group by stage_id
),

-- each group with itself and every group below it
group_tree(group_id, member_group_id) as (
    select group_id, group_id from staging.stg_esper__groups
    union
    select tree.group_id, children.group_id
    from group_tree as tree
    inner join staging.stg_esper__groups as children
        on children.parent_group_id = tree.member_group_id
),

planned_devices as (
    select
        stage_id,
        count(distinct device_id) as planned_devices,
    from (
        select stage_id, device_id
        from staging.stg_esper__pipeline_stage_targets
        where target_list_type = 'DEVICES'
        union all
        select targets.stage_id, devices.device_id
        from staging.stg_esper__pipeline_stage_targets as targets
        inner join group_tree on group_tree.group_id = targets.device_group_id
        inner join intermediate.int_devices_current as devices
            on devices.group_id = group_tree.member_group_id
            and not devices.is_removed
        where targets.target_list_type = 'GROUPS'
    )
    group by stage_id
),

run_releases as (
    select
        stage_runs.pipeline_run_id,
        min(json_extract_string(operations.args, '$.app_version')) as application_version_id,
    from staging.stg_esper__pipeline_stage_run_operations as operations
    inner join stage_runs on stage_runs.stage_run_id = operations.stage_run_id
    group by stage_runs.pipeline_run_id
),

app_names as (
    select
        package_name,
        min(application_name) as application_name,
    from staging.stg_esper__applications
    group by package_name
),

first_unreached as (
    select
        runs.pipeline_run_id,
        min(stages.stage_order) as stage_order,
    from runs
    inner join stages on stages.pipeline_id = runs.pipeline_id
    left join stage_runs
        on stage_runs.pipeline_run_id = runs.pipeline_run_id
        and stage_runs.stage_id = stages.stage_id
    where stage_runs.stage_run_id is null
    group by runs.pipeline_run_id
),

-- the stage each run is at: the last it reached, else its first
position as (
    select
        runs.pipeline_run_id,
        max(stages.stage_order) filter (where stage_runs.stage_run_id is not null)
            as last_reached_order,
        min(stages.stage_order) as first_order,
    from runs
    inner join stages on stages.pipeline_id = runs.pipeline_id
    left join stage_runs
        on stage_runs.pipeline_run_id = runs.pipeline_run_id
        and stage_runs.stage_id = stages.stage_id
    group by runs.pipeline_run_id
),

final as (
    select
        runs.pipeline_id,
        runs.pipeline_name,
        runs.pipeline_run_id,
        runs.run_number,
        runs.status as run_status,
        stages.stage_id,
        stages.stage_order,
        stages.stage_name,
        stage_runs.stage_run_id,
        coalesce(stage_runs.status, 'not_started') as status,
        coalesce(per_stage_run.target_devices, 0) as target_devices,
        coalesce(per_stage_run.succeeded_devices, 0) as succeeded_devices,
        coalesce(per_stage_run.failed_devices, 0) as failed_devices,
        coalesce(per_stage_run.timed_out_devices, 0) as timed_out_devices,
        coalesce(per_stage_run.cancelled_devices, 0) as cancelled_devices,
        coalesce(per_stage_run.in_progress_devices, 0) as in_progress_devices,
        cast(per_stage_run.target_devices - per_stage_run.in_progress_devices as double)
            / nullif(per_stage_run.target_devices, 0) as share_done,
        stage_runs.started_at,
        stage_runs.ended_at,
        round(
            epoch(coalesce(stage_runs.ended_at, as_of.as_of) - stage_runs.started_at) / 3600.0, 2
        ) as hours_taken,
        case
            when runs.status = 'waiting' and first_unreached.stage_order = stages.stage_order
                then runs.updated_at
        end as waiting_for_approval_since,
        coalesce(top_reasons.top_failure_reasons, []) as top_failure_reasons,
        runs.status in ('pending', 'queued', 'processing', 'running', 'waiting', 'complete')
            as is_run_open,
        runs.updated_at as run_updated_at,
        run_changes.last_change_at,
        coalesce(
            is_run_open
            and runs.status <> 'waiting'
            and run_changes.last_change_at
            < as_of.as_of - to_hours(pipeline_stalled_after_hours())
            and stages.stage_order
            = coalesce(position.last_reached_order, position.first_order),
            false
        ) as is_stalled,
        coalesce(
            is_run_open
            and stages.stage_order = position.last_reached_order
            and failed_devices + timed_out_devices > pipeline_failing_share() * target_devices,
            false
        ) as is_failing,
        planned_operations.operation_type,
        case
            when planned_operations.package_name is not null then concat_ws(
                ' ',
                coalesce(app_names.application_name, planned_operations.package_name),
                coalesce(versions.release_name, 'version code ' || versions.version_code)
            )
            else planned_operations.operation_type
        end as operation_summary,
        planned_targets.target_type,
        coalesce(planned_targets.planned_targets, 0) as planned_targets,
        coalesce(planned_devices.planned_devices, 0) as planned_devices,
        as_of.as_of as data_as_of,
        as_of.age_note as age_note,
    from runs
    cross join as_of
    left join stages on stages.pipeline_id = runs.pipeline_id
    left join stage_runs
        on stage_runs.pipeline_run_id = runs.pipeline_run_id
        and stage_runs.stage_id = stages.stage_id
    left join per_stage_run on per_stage_run.stage_run_id = stage_runs.stage_run_id
    left join top_reasons on top_reasons.stage_run_id = stage_runs.stage_run_id
    left join first_unreached on first_unreached.pipeline_run_id = runs.pipeline_run_id
    left join position on position.pipeline_run_id = runs.pipeline_run_id
    left join run_changes on run_changes.pipeline_run_id = runs.pipeline_run_id
    left join planned_devices on planned_devices.stage_id = stages.stage_id
    left join planned_operations on planned_operations.stage_id = stages.stage_id
    left join planned_targets on planned_targets.stage_id = stages.stage_id
    left join run_releases on run_releases.pipeline_run_id = runs.pipeline_run_id
    left join staging.stg_esper__application_versions as versions
        on versions.application_version_id = run_releases.application_version_id
    left join app_names on app_names.package_name = planned_operations.package_name
)

select * from final
