-- materialized: table
-- "Now" for the device models, one row, in the columns of intermediate.int_as_of: the time the
-- devices family (devices, their history, heartbeats, installed apps) is as of
-- (intermediate.int_family_freshness), so last seen, patch age and the device x day spine are
-- judged where those tables were loaded, never at a newer "now" a run reached without them (a
-- selection of other tables, a refused heartbeats route). The warehouse's "now" when the devices
-- were never loaded (an empty warehouse: every model still builds).
with

warehouse as (
    select * from intermediate.int_as_of
),

devices as (
    select data_as_of, age_note
    from intermediate.int_family_freshness
    where family = 'devices'
),

final as (
    select
        coalesce(devices.data_as_of, warehouse.as_of) as as_of,
        utc_date(coalesce(devices.data_as_of, warehouse.as_of)) as as_of_date,
        warehouse.first_load_at,
        warehouse.loaded_run_count,
        least(
            warehouse.spine_start_date, utc_date(coalesce(devices.data_as_of, warehouse.as_of))
        ) as spine_start_date,
        devices.data_as_of as data_as_of,
        devices.age_note as age_note,
    from warehouse
    left join devices on true
)

select * from final
