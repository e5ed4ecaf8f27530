-- Typed required apps per platform (sql/seeds/compliance_required_apps.csv).
with

source as (
    select * from seeds.compliance_required_apps
),

renamed as (
    select
        -- ids
        upper(clean_text(platform)) as platform,
        clean_text(package_name) as package_name,

        -- targets
        clean_text(min_version) as min_version,
        version_key(clean_text(min_version)) as min_version_key,

    from source
    where clean_text(platform) is not null
        and clean_text(package_name) is not null
)

select * from renamed
