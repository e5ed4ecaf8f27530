-- Each subject's state now, in the words the changes compare (found.sql): one row per current
-- device (marts.fleet_compliance: its verdict and reasons, and whether marts.stale_devices holds
-- it), credential (marts.credential_expiry), Pipeline run (marts.pipeline_rollout, one run per
-- row) and catalogue app (its highest version). The day spine (int_device_day_checks) is never
-- read here: the marts' as-of day is the one they judge.
with

compliance as (
    select * from marts.fleet_compliance
),

stale as (
    select device_id from marts.stale_devices
),

credentials as (
    select * from marts.credential_expiry
),

kinds as (
    select * from staging.stg_seeds__credential_kinds
),

rollout as (
    select * from marts.pipeline_rollout
),

pipeline_runs as (
    select * from staging.stg_esper__pipeline_runs
),

android_versions as (
    select
        applications.application_id as app_id,
        applications.application_name as app_name,
        versions.version_key,
        coalesce(versions.release_name, versions.version_code) as version_name,
    from staging.stg_esper__application_versions as versions
    inner join staging.stg_esper__applications as applications
        on applications.application_id = versions.application_id
),

tenant_versions as (
    select
        versions.tenant_app_id as app_id,
        coalesce(versions.app_name, apps.package_name) as app_name,
        versions.version_key,
        coalesce(versions.version_name, versions.version_code) as version_name,
    from staging.stg_esper__tenant_app_versions as versions
    inner join staging.stg_esper__tenant_apps as apps
        on apps.tenant_app_id = versions.tenant_app_id
),

app_versions as (
    select * from android_versions
    union all
    select * from tenant_versions
),

devices as (
    select
        'devices' as family,
        'device' as subject_kind,
        compliance.device_id as subject_id,
        compliance.device_name as subject_name,
        compliance.verdict,
        compliance.reasons,
        stale.device_id is not null as is_stale,
        compliance.last_seen_bucket,
        null::varchar as credential_status,
        null::integer as days_left,
        null::integer as warning_days,
        null::integer as urgent_days,
        null::varchar as run_status,
        null::boolean as is_failing,
        null::boolean as is_stalled,
        null::boolean as is_ended,
        null::varchar as version_name,
        null::bigint[] as version_key,
    from compliance
    left join stale
        on stale.device_id = compliance.device_id
),

credential_states as (
    select
        'credentials' as family,
        'credential' as subject_kind,
        credentials.credential_kind || ':' || credentials.credential_id as subject_id,
        coalesce(credentials.credential_name, credentials.credential_kind) as subject_name,
        null::varchar as verdict,
        null::varchar[] as reasons,
        null::boolean as is_stale,
        null::varchar as last_seen_bucket,
        credentials.status as credential_status,
        credentials.days_left,
        credentials.warning_days,
        kinds.urgent_days,
        null::varchar as run_status,
        null::boolean as is_failing,
        null::boolean as is_stalled,
        null::boolean as is_ended,
        null::varchar as version_name,
        null::bigint[] as version_key,
    from credentials
    left join kinds
        on kinds.credential_kind = credentials.credential_kind
),

run_flags as (
    select
        pipeline_run_id,
        any_value(pipeline_name) as pipeline_name,
        any_value(run_number) as run_number,
        any_value(run_status) as run_status,
        coalesce(bool_or(is_failing), false) as is_failing,
        coalesce(bool_or(is_stalled), false) as is_stalled,
    from rollout
    group by pipeline_run_id
),

run_states as (
    select
        'pipelines' as family,
        'pipeline_run' as subject_kind,
        run_flags.pipeline_run_id as subject_id,
        coalesce(run_flags.pipeline_name, pipeline_runs.pipeline_id) || ' #'
            || run_flags.run_number as subject_name,
        null::varchar as verdict,
        null::varchar[] as reasons,
        null::boolean as is_stale,
        null::varchar as last_seen_bucket,
        null::varchar as credential_status,
        null::integer as days_left,
        null::integer as warning_days,
        null::integer as urgent_days,
        run_flags.run_status,
        run_flags.is_failing,
        run_flags.is_stalled,
        pipeline_runs.ended_at is not null as is_ended,
        null::varchar as version_name,
        null::bigint[] as version_key,
    from run_flags
    left join pipeline_runs
        on pipeline_runs.pipeline_run_id = run_flags.pipeline_run_id
),

app_states as (
    select
        'catalogues' as family,
        'app' as subject_kind,
        app_id as subject_id,
        arg_max(app_name, version_key) as subject_name,
        null::varchar as verdict,
        null::varchar[] as reasons,
        null::boolean as is_stale,
        null::varchar as last_seen_bucket,
        null::varchar as credential_status,
        null::integer as days_left,
        null::integer as warning_days,
        null::integer as urgent_days,
        null::varchar as run_status,
        null::boolean as is_failing,
        null::boolean as is_stalled,
        null::boolean as is_ended,
        arg_max(version_name, version_key) as version_name,
        max(version_key) as version_key,
    from app_versions
    where version_key is not null
    group by app_id
),

final as (
    select * from devices
    union all
    select * from credential_states
    union all
    select * from run_states
    union all
    select * from app_states
)

select * from final
