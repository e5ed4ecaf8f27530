-- int_rollout_progress: how far each rollout has got, one row per command request and per
-- operation (rollout_kind 'command' or 'operation', rollout_id its id). The two rollout marts read
-- their counts, rates, percentiles and failure reasons here, so both follow one definition; the
-- column meanings are documented in sql/marts/command_rollout.sql. A target (a device, else the
-- record itself) counts with its latest record (updated_at).
with

rollouts as (
    select
        'command' as rollout_kind,
        command_request_id as rollout_id,
    from staging.stg_esper__command_requests
    where command_request_id is not null
    union all
    select
        'operation' as rollout_kind,
        operation_id as rollout_id,
    from staging.stg_esper__operations
    where operation_id is not null
),

command_targets as (
    select
        'command' as rollout_kind,
        command_request_id as rollout_id,
        state,
        is_terminal,
        reason,
        created_at,
        updated_at,
    from staging.stg_esper__command_statuses
    where command_request_id is not null
    qualify row_number() over (
        partition by command_request_id, coalesce(device_id, command_status_id)
        order by updated_at desc nulls last, command_status_id desc
    ) = 1
),

operation_targets as (
    select
        'operation' as rollout_kind,
        operation_id as rollout_id,
        state,
        is_terminal,
        reason,
        created_at,
        updated_at,
    from staging.stg_esper__operation_devices
    where operation_id is not null
    qualify row_number() over (
        partition by operation_id, coalesce(device_id, operation_device_id)
        order by updated_at desc nulls last, operation_device_id desc
    ) = 1
),

targets as (
    select * from command_targets
    union all
    select * from operation_targets
),

per_rollout as (
    select
        rollout_kind,
        rollout_id,
        count(*) as target_devices,
        count(*) filter (where state = 'queued') as queued_devices,
        count(*) filter (where state = 'initiated') as initiated_devices,
        count(*) filter (where state = 'acknowledged') as acknowledged_devices,
        count(*) filter (where state = 'in_progress') as in_progress_devices,
        count(*) filter (where state = 'scheduled') as scheduled_devices,
        count(*) filter (where state = 'success') as success_devices,
        count(*) filter (where state = 'failure') as failure_devices,
        count(*) filter (where state = 'timeout') as timeout_devices,
        count(*) filter (where state = 'cancelled') as cancelled_devices,
        count(*) filter (where state = 'unknown') as unknown_state_devices,
        count(*) filter (where is_terminal) as terminal_devices,
        quantile_cont(epoch(updated_at - created_at) / 60.0, 0.5) filter (where is_terminal)
            as p50_minutes_to_terminal,
        quantile_cont(epoch(updated_at - created_at) / 60.0, 0.9) filter (where is_terminal)
            as p90_minutes_to_terminal,
        max(updated_at) as last_update_at,
    from targets
    group by rollout_kind, rollout_id
),

failure_reasons as (
    select
        rollout_kind,
        rollout_id,
        coalesce(reason, '(no reason given)') as reason,
        count(*) as devices,
    from targets
    where state in ('failure', 'timeout')
    group by rollout_kind, rollout_id, coalesce(reason, '(no reason given)')
),

top_reasons as (
    select
        rollout_kind,
        rollout_id,
        list({'reason': reason, 'devices': devices} order by devices desc, reason)[1:3]
            as top_failure_reasons,
    from failure_reasons
    group by rollout_kind, rollout_id
),

final as (
    select
        rollouts.rollout_kind as rollout_kind,
        rollouts.rollout_id as rollout_id,
        coalesce(per_rollout.target_devices, 0) as target_devices,
        coalesce(per_rollout.queued_devices, 0) as queued_devices,
        coalesce(per_rollout.initiated_devices, 0) as initiated_devices,
        coalesce(per_rollout.acknowledged_devices, 0) as acknowledged_devices,
        coalesce(per_rollout.in_progress_devices, 0) as in_progress_devices,
        coalesce(per_rollout.scheduled_devices, 0) as scheduled_devices,
        coalesce(per_rollout.success_devices, 0) as success_devices,
        coalesce(per_rollout.failure_devices, 0) as failure_devices,
        coalesce(per_rollout.timeout_devices, 0) as timeout_devices,
        coalesce(per_rollout.cancelled_devices, 0) as cancelled_devices,
        coalesce(per_rollout.unknown_state_devices, 0) as unknown_state_devices,
        coalesce(per_rollout.terminal_devices, 0) as terminal_devices,
        coalesce(per_rollout.target_devices - per_rollout.terminal_devices, 0) as pending_devices,
        cast(per_rollout.success_devices as double) / nullif(per_rollout.target_devices, 0) as success_rate,
        cast(per_rollout.failure_devices as double) / nullif(per_rollout.target_devices, 0) as failure_rate,
        cast(per_rollout.timeout_devices as double) / nullif(per_rollout.target_devices, 0) as timeout_rate,
        cast(per_rollout.terminal_devices as double) / nullif(per_rollout.target_devices, 0) as completion_rate,
        coalesce(
            per_rollout.target_devices > 0
                and per_rollout.terminal_devices = per_rollout.target_devices,
            false
        ) as is_complete,
        per_rollout.p50_minutes_to_terminal as p50_minutes_to_terminal,
        per_rollout.p90_minutes_to_terminal as p90_minutes_to_terminal,
        coalesce(top_reasons.top_failure_reasons, []) as top_failure_reasons,
        per_rollout.last_update_at as last_update_at,
    from rollouts
    left join per_rollout
        on per_rollout.rollout_kind = rollouts.rollout_kind
        and per_rollout.rollout_id = rollouts.rollout_id
    left join top_reasons
        on top_reasons.rollout_kind = rollouts.rollout_kind
        and top_reasons.rollout_id = rollouts.rollout_id
),

ranked as (
    -- failing_rank: the one ranking of "worst rollouts" (marts.headlines, the demo, the report,
    -- the README): failure + timeout rate, highest first, among rollouts to
    -- rollout_ranked_from_devices() devices or more (sql/macros); ties: more targets, then the id
    select
        final.*,
        case
            when final.target_devices >= rollout_ranked_from_devices() then row_number() over (
                partition by
                    final.rollout_kind,
                    final.target_devices >= rollout_ranked_from_devices()
                order by
                    coalesce(final.failure_rate, 0) + coalesce(final.timeout_rate, 0) desc,
                    final.target_devices desc,
                    final.rollout_id
            )
        end as failing_rank,
    from final
)

select * from ranked
