-- Whom a stage targets (spec `TargetList`, then its `Target` devices or its
-- `TargetListDeviceGroup` groups): one row per device of a DEVICES list, per group of a GROUPS
-- list (resolved to devices when a run reaches the stage).
with

source as (
    select * from esper.pipeline_stage_targets
),

renamed as (
    select
        -- ids
        clean_text(id) as target_id,
        clean_text(stage_id) as stage_id,
        clean_text(pipeline_id) as pipeline_id,
        clean_text(target_list_id) as target_list_id,
        clean_text(device_id) as device_id,
        clean_text(device_group_id) as device_group_id,

        -- descriptors
        clean_text(target_list_name) as target_list_name,
        upper(clean_text(target_list_type)) as target_list_type,
        clean_text(device_name) as device_name,
        clean_text(device_alias) as device_alias,
        is_active,

        -- timestamps
        as_timestamptz(created_at) as created_at,
        as_timestamptz(updated_at) as updated_at,

    from source
)

select * from renamed
