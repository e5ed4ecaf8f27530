-- Every device a device-level mart lists is a current device: in intermediate.int_devices_current
-- and not removed. Offending rows: the mart and the device.
with

current_devices as (
    select device_id from intermediate.int_devices_current where not is_removed
)

select 'marts.fleet_compliance' as relation, device_id
from marts.fleet_compliance as mart
where not exists (select 1 from current_devices where current_devices.device_id = mart.device_id)

union all

select 'marts.stale_devices' as relation, device_id
from marts.stale_devices as mart
where not exists (select 1 from current_devices where current_devices.device_id = mart.device_id)
