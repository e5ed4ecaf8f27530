-- Every version of every device ever loaded (one row per device and updated_at).
-- The renaming lives once, in `staged_devices` (sql/macros/staging.sql), shared with its twin.
select * from staged_devices('esper.device_history')
