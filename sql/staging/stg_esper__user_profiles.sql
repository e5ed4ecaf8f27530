-- Each user's legacy detail (`/user/{id}/`): the legacy role name, the authz role id when the
-- user has one, whether the account is active, the last login, and the groups it is limited to.
-- (The API's `token` is never loaded.)
with

source as (
    select * from esper.user_profiles
),

renamed as (
    select
        -- ids
        cast(id as bigint) as legacy_user_id,
        clean_text(user_id) as user_id,
        clean_text(profile__authz_role_id) as authz_role_id,
        clean_text(profile__authn_user_id) as authn_user_id,

        -- descriptors
        clean_text(username) as username,
        lower(clean_text(email)) as email,
        clean_text(full_name) as full_name,
        clean_text(profile__role) as legacy_role_name,
        as_json(profile__groups) as profile_groups,

        -- booleans
        cast(is_active as boolean) as is_active,
        cast(is_staff as boolean) as is_staff,
        cast(is_superuser as boolean) as is_superuser,
        cast(profile__has_all_group_access as boolean) as has_all_group_access,
        cast(profile__can_factory_reset as boolean) as can_factory_reset,

        -- timestamps
        try_cast(clean_text(last_login) as timestamptz) as last_login_at,
        try_cast(clean_text(profile__created_on) as timestamptz) as profile_created_at,
        try_cast(clean_text(profile__updated_on) as timestamptz) as profile_updated_at,

    from source
)

select * from renamed
