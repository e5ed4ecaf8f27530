-- pipeline_rollout_current: described, with every column, in sql/marts/_marts.yml.
with

rollout as (
    select * from marts.pipeline_rollout
),

runs as (
    select * from staging.stg_esper__pipeline_runs
),

latest as (
    select *
    from runs
    qualify row_number() over (
        partition by pipeline_id order by run_number desc, pipeline_run_id
    ) = 1
),

per_run as (
    select
        pipeline_run_id,
        count(*) as stages,
        count(stage_run_id) as stages_reached,
        max(stage_order) filter (where stage_run_id is not null) as current_stage_order,
        sum(target_devices) as target_devices,
        sum(succeeded_devices) as succeeded_devices,
        sum(failed_devices) as failed_devices,
        sum(timed_out_devices) as timed_out_devices,
        sum(cancelled_devices) as cancelled_devices,
        sum(in_progress_devices) as in_progress_devices,
        max(waiting_for_approval_since) as waiting_for_approval_since,
        bool_or(is_stalled) as is_stalled,
        bool_or(is_failing) as is_failing,
        max(last_change_at) as last_change_at,
    from rollout
    group by pipeline_run_id
),

final as (
    select
        latest.pipeline_id,
        latest.pipeline_name,
        latest.pipeline_run_id,
        latest.run_number,
        latest.status as run_status,
        latest.started_at as run_started_at,
        latest.ended_at as run_ended_at,
        coalesce(per_run.stages, 0) as stages,
        coalesce(per_run.stages_reached, 0) as stages_reached,
        per_run.current_stage_order,
        current_stage.stage_name as current_stage_name,
        current_stage.status as current_stage_status,
        coalesce(per_run.target_devices, 0) as target_devices,
        coalesce(per_run.succeeded_devices, 0) as succeeded_devices,
        coalesce(per_run.failed_devices, 0) as failed_devices,
        coalesce(per_run.timed_out_devices, 0) as timed_out_devices,
        coalesce(per_run.cancelled_devices, 0) as cancelled_devices,
        coalesce(per_run.in_progress_devices, 0) as in_progress_devices,
        cast(per_run.target_devices - per_run.in_progress_devices as double)
            / nullif(per_run.target_devices, 0) as share_done,
        per_run.waiting_for_approval_since,
        latest.updated_at as run_updated_at,
        per_run.last_change_at,
        coalesce(per_run.is_stalled, false) as is_stalled,
        coalesce(per_run.is_failing, false) as is_failing,
        current_stage.target_devices as current_stage_target_devices,
        current_stage.succeeded_devices as current_stage_succeeded_devices,
        current_stage.failed_devices as current_stage_failed_devices,
        current_stage.timed_out_devices as current_stage_timed_out_devices,
        current_stage.in_progress_devices as current_stage_in_progress_devices,
        current_stage.share_done as current_stage_share_done,
        age.data_as_of as data_as_of,
        age.age_note as age_note,
    from latest
    cross join (
        select data_as_of, age_note
        from intermediate.int_family_freshness
        where family = 'pipelines'
    ) as age
    left join per_run on per_run.pipeline_run_id = latest.pipeline_run_id
    left join rollout as current_stage
        on current_stage.pipeline_run_id = latest.pipeline_run_id
        and current_stage.stage_order = per_run.current_stage_order
)

select * from final
