-- The scopes each role grants (authz2). A scope name is `action:resource[:qualifier]`
-- (`create:device_command:WIPE`, `read:device`): split into its parts.
-- is_well_formed: the name has that form, each part a word (letters, digits, `_`), as every name
-- of the API's scope list (docs/spec/openapi-notes-credentials-access.md section 4) does; false
-- for any other form (`create:device_command:*`, `device.command.wipe`, `a:b:c:d`), whose parts
-- say nothing reliable.
with

source as (
    select * from esper.role_scopes
),

renamed as (
    select
        -- ids
        clean_text(role_id) as role_id,
        clean_text(id) as scope_id,

        -- descriptors
        clean_text(name) as scope_name,
        lower(split_part(clean_text(name), ':', 1)) as scope_action,
        nullif(lower(split_part(clean_text(name), ':', 2)), '') as scope_resource,
        nullif(upper(split_part(clean_text(name), ':', 3)), '') as scope_qualifier,
        clean_text(description) as description,

        -- numerics
        cast(scope_type as integer) as scope_type,
        cast(organization_type as integer) as organization_type,

        -- booleans
        coalesce(
            regexp_full_match(clean_text(name), '[A-Za-z0-9_]+:[A-Za-z0-9_]+(:[A-Za-z0-9_]+)?'),
            false
        ) as is_well_formed,

    from source
)

select * from renamed
