-- fleet_access: described, with every column, in sql/marts/_marts.yml.
with

as_of as (
    select
        data_as_of as as_of,
        age_note,
    from intermediate.int_family_freshness
    where family = 'access'
),

users as (
    select * from staging.stg_esper__users
),

profiles as (
    select * from staging.stg_esper__user_profiles
),

user_groups as (
    select * from staging.stg_esper__user_groups
),

roles as (
    select * from staging.stg_esper__roles
),

scopes as (
    select
        role_id,
        scope_name,
        scope_action,
        scope_resource,
        scope_qualifier,
        is_well_formed,
        scope_action = 'create'
            and scope_resource in ('device_command', 'group_command', 'operation')
            as is_command_scope,
    from staging.stg_esper__role_scopes
),

command_scopes as (  -- scopes that name the command they let the role send
    select role_id, scope_qualifier as command
    from scopes
    where is_well_formed
        and is_command_scope
        and scope_qualifier is not null
),

unreadable_scopes as (  -- scopes that may grant any command, or none: never read as either
    select
        role_id,
        string_agg(coalesce(scope_name, '(no name)'), ', ' order by scope_name) as scope_names,
    from scopes
    where not is_well_formed
        or (is_command_scope and scope_qualifier is null)
    group by role_id
),

destructive as (
    select command from staging.stg_seeds__destructive_commands
),

roles_by_name as (  -- a legacy name matches a role only when one role has that name
    select lower(role_name) as name_key, any_value(role_id) as role_id
    from roles
    where role_name is not null
    group by 1
    having count(*) = 1
),

matched as (
    select
        users.user_id,
        coalesce(profiles.authz_role_id, roles_by_name.role_id) as role_id,
        case
            when profiles.authz_role_id is not null then 'authz_role_id'
            when roles_by_name.role_id is not null then 'legacy role name'
        end as role_matched_by,
    from users
    left join profiles
        on users.user_id = profiles.user_id
    left join roles_by_name
        on lower(profiles.legacy_role_name) = roles_by_name.name_key
        and profiles.authz_role_id is null
),

role_scopes_read as (
    select distinct role_id from staging.stg_esper__role_scopes
),

role_grants as (
    select
        role_scopes_read.role_id,
        coalesce(bool_or(command_scopes.command = 'WIPE'), false) as grants_wipe,
        coalesce(bool_or(command_scopes.command = 'REBOOT'), false) as grants_reboot,
        coalesce(bool_or(command_scopes.command = 'LOCK'), false) as grants_lock,
        coalesce(
            string_agg(distinct destructive.command, ', ' order by destructive.command), ''
        ) as destructive_commands,
    from role_scopes_read
    left join command_scopes
        on role_scopes_read.role_id = command_scopes.role_id
    left join destructive
        on command_scopes.command = destructive.command
    group by role_scopes_read.role_id
),

role_commands as (  -- true when granted; false only when every scope of the role was read
    select
        role_grants.role_id,
        unreadable_scopes.role_id is null as scopes_known,
        unreadable_scopes.scope_names as unreadable_scopes,
        case
            when role_grants.grants_wipe then true
            when unreadable_scopes.role_id is null then false
        end as can_wipe,
        case
            when role_grants.grants_reboot then true
            when unreadable_scopes.role_id is null then false
        end as can_reboot,
        case
            when role_grants.grants_lock then true
            when unreadable_scopes.role_id is null then false
        end as can_lock,
        case
            when unreadable_scopes.role_id is null then role_grants.destructive_commands
            else nullif(role_grants.destructive_commands, '')
        end as destructive_commands,
    from role_grants
    left join unreadable_scopes
        on role_grants.role_id = unreadable_scopes.role_id
),

requests as (
    select
        command_request_id,
        created_by,
        created_at,
        command,
        case when command_type = 'GROUP' then 'group_command' else 'device_command' end
            as scope_resource,
    from staging.stg_esper__command_requests
    where created_by is not null
),

grantable as (  -- (kind, command) pairs some role of the tenant holds a scope for
    select distinct scope_resource, scope_qualifier as command
    from scopes
    where is_well_formed
        and scope_action = 'create'
        and scope_qualifier is not null
),

sent as (
    select
        requests.created_by as user_id,
        count(*) as commands_sent,
        count(*) filter (
            where grantable.command is not null and granted.role_id is null
        ) as commands_unscoped,
        count(*) filter (
            where profiles.is_active = false
                and requests.created_at > coalesce(profiles.last_login_at, '-infinity'::timestamptz)
        ) as commands_while_inactive,
    from requests
    left join matched
        on matched.user_id = requests.created_by
    left join profiles
        on profiles.user_id = requests.created_by
    left join grantable
        on grantable.scope_resource = requests.scope_resource
        and grantable.command = requests.command
    left join (
        select distinct role_id, scope_resource, scope_qualifier
        from scopes
        where is_well_formed
            and scope_action = 'create'
    ) as granted
        on granted.role_id = matched.role_id
        and granted.scope_resource = requests.scope_resource
        and granted.scope_qualifier = requests.command
    group by requests.created_by
),

final as (
    select
        as_of.as_of,
        as_of.as_of as data_as_of,
        as_of.age_note,
        users.user_id,
        users.legacy_user_id,
        users.user_name as name,
        users.email,
        profiles.is_active,
        profiles.last_login_at as last_login,
        matched.role_id,
        coalesce(roles.role_name, profiles.legacy_role_name) as role_name,
        matched.role_matched_by,
        coalesce(user_groups.has_all_group_access, profiles.has_all_group_access)
            as has_all_group_access,
        case
            when user_groups.user_id is not null then json_array_length(user_groups.group_ids)
            else json_array_length(profiles.profile_groups)
        end as group_count,
        coalesce(role_commands.scopes_known, false) as scopes_known,
        role_commands.unreadable_scopes,
        role_commands.can_wipe,
        role_commands.can_reboot,
        role_commands.can_lock,
        role_commands.destructive_commands,
        coalesce(sent.commands_sent, 0) as commands_sent,
        case
            when coalesce(role_commands.scopes_known, false)
                then coalesce(sent.commands_unscoped, 0)
        end as commands_beyond_role,
        case
            when profiles.is_active is not null then coalesce(sent.commands_while_inactive, 0)
        end as commands_while_inactive,
    from users
    cross join as_of
    left join profiles
        on users.user_id = profiles.user_id
    left join matched
        on users.user_id = matched.user_id
    left join roles
        on matched.role_id = roles.role_id
    left join user_groups
        on users.user_id = user_groups.user_id
    left join role_commands
        on matched.role_id = role_commands.role_id
    left join sent
        on users.user_id = sent.user_id
)

select * from final
