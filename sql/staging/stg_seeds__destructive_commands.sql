-- Typed destructive commands (sql/vocabulary/destructive_commands.csv): the commands whose
-- scopes marts.fleet_access reports.
with

source as (
    select * from seeds.destructive_commands
),

renamed as (
    select
        -- ids
        upper(clean_text(command)) as command,

        -- descriptors
        clean_text(what_it_does) as what_it_does,

    from source
    where clean_text(command) is not null
)

select * from renamed
