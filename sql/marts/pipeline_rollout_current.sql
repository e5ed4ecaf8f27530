-- pipeline_rollout_current: where each Esper Pipeline's latest run stands now. One row per
-- pipeline that has run at least once: its latest run (the highest run_number) and the stage
-- that run is at (marts.pipeline_rollout).
--
-- Columns
--   pipeline_id, pipeline_name       the pipeline
--   pipeline_run_id, run_number      its latest run
--   run_status                       that run's status (the spec's lowercase enum)
--   run_started_at, run_ended_at     that run's start and end (NULL while open)
--   stages                           stages in the pipeline
--   stages_reached                   stages the run has a stage run for
--   current_stage_order, current_stage_name, current_stage_status
--                                    the last stage reached (NULL when none yet)
--   target_devices                   target runs of the run, over every stage reached
--   succeeded_devices, failed_devices, timed_out_devices, cancelled_devices, in_progress_devices
--                                    those target runs by status (as in pipeline_rollout)
--   share_done                       ended target runs / target_devices (NULL without targets)
--   waiting_for_approval_since       when the run began to wait for an approval (NULL: not waiting)
--   run_updated_at                   that run record's own last change (its updated_at)
--   last_change_at                   the newest change anywhere in that run (as in
--                                    marts.pipeline_rollout: the run, its stage runs, their
--                                    target runs)
--   is_stalled, is_failing           that run is stalled, or failing, at its current stage (the
--                                    flags of marts.pipeline_rollout, on whichever stage they are)
--   current_stage_target_devices, current_stage_succeeded_devices, current_stage_failed_devices,
--   current_stage_timed_out_devices, current_stage_in_progress_devices, current_stage_share_done
--                                    the current stage's own figures (marts.pipeline_rollout's row
--                                    of that stage): what a row labelled with the stage shows
--   data_as_of, age_note             the time the Pipelines tables are as of, and how old that is
--                                    (as in marts.pipeline_rollout)
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
