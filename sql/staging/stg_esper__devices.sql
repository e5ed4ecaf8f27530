-- Devices as the API serves them now (one row per device, latest load).
-- The renaming lives once, in `staged_devices` (sql/macros/staging.sql), shared with its twin.
select * from staged_devices('esper.devices')
