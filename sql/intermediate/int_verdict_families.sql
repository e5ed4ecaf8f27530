-- The table families a compliance verdict reads (intermediate.int_device_day_checks): the devices
-- family (devices, their history, heartbeats, installed apps) and the catalogues (blueprints and
-- their versions, for the blueprint check). A verdict, and every number drawn from verdicts
-- (marts.fleet_compliance, the compliance headlines), is as old as the oldest of them.
-- tests/sql/test_verdict_age.py holds this list to the raw tables the checks read.
--
-- Columns
--   family   a family of seeds.table_families
with

final as (
    select family
    from (
        values
            ('devices'),
            ('catalogues')
    ) as families (family)
)

select * from final
