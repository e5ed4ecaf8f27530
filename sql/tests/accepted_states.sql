-- Command and operation states: the vocabulary (sql/vocabulary/work_states.csv) maps every API
-- state to one of the tidy states the rollout marts count, with is_terminal true or false, and the
-- operations in operation_rollout carry a tidy state or 'unknown' (an API state the vocabulary
-- does not know, counted apart as unknown_state_devices). The staged command and operation-device
-- states come from the same macro (tidy_state: a vocabulary state or 'unknown'), so checking the
-- vocabulary checks them without re-reading every status row.
with

tidy (state) as (
    values ('scheduled'), ('queued'), ('initiated'), ('acknowledged'), ('in_progress'),
        ('success'), ('failure'), ('timeout'), ('cancelled')
)

select
    'vocabulary work_states.csv: ' || coalesce(kind, '(empty)') || ' ' || coalesce(api_state, '(empty)')
    || ' maps to ' || coalesce(state, '(empty)') || ', is_terminal '
    || coalesce(is_terminal, '(empty)') || '; state must be one of scheduled, queued, initiated, '
    || 'acknowledged, in_progress, success, failure, timeout, cancelled and is_terminal true or '
    || 'false' as problem
from seeds.work_states
where kind not in ('command', 'operation', 'operation_device')
    or kind is null
    or state is null
    or state not in (select state from tidy)
    or is_terminal is null
    or is_terminal not in ('true', 'false')

union all

select 'marts.operation_rollout: ' || coalesce(operation_id, '(no id)') || ' has state ' || coalesce(state, 'NULL')
from marts.operation_rollout
where state is null or (state <> 'unknown' and state not in (select state from tidy))
