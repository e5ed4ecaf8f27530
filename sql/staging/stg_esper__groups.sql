-- Device groups. Legacy records link by URL: `parent` and `enterprise` become ids.
with

source as (
    select * from esper.groups
),

renamed as (
    select
        -- ids
        clean_text(id) as group_id,
        ref_id(parent) as parent_group_id,
        clean_text(blueprint) as blueprint_id,
        ref_id(enterprise) as enterprise_id,

        -- descriptors
        clean_text(name) as group_name,
        coalesce(clean_text(path), clean_text(name)) as group_path,

        -- numerics
        cast(device_count as integer) as device_count,
        cast(children_count as integer) as children_count,

        -- timestamps
        as_timestamptz(created_on) as created_at,

    from source
)

select * from renamed
