-- Each user's group access (authz2): all groups, or the groups named in `group_ids`.
with

source as (
    select * from esper.user_groups
),

renamed as (
    select
        -- ids
        clean_text(user_id) as user_id,
        as_json(group_ids) as group_ids,

        -- booleans
        cast(has_all_group_access as boolean) as has_all_group_access,

    from source
)

select * from renamed
