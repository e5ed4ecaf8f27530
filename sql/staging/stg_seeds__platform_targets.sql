-- Typed compliance targets per platform (sql/seeds/compliance_platform_targets.csv).
with

source as (
    select * from seeds.compliance_platform_targets
),

renamed as (
    select
        -- ids
        upper(clean_text(platform)) as platform,

        -- targets
        clean_text(min_os_version) as min_os_version,
        version_key(clean_text(min_os_version)) as min_os_version_key,
        cast(clean_text(max_security_patch_age_days) as integer) as max_security_patch_age_days,
        clean_text(min_agent_version) as min_agent_version,
        version_key(clean_text(min_agent_version)) as min_agent_version_key,

    from source
    where clean_text(platform) is not null
)

select * from renamed
