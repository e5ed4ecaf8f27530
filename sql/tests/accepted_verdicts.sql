-- Every current device has one of the four verdicts (fleet_compliance, and stale_devices which
-- repeats it): compliant, non_compliant, unverified, out_of_service. Offending rows: the device
-- and the verdict it got.
select 'marts.fleet_compliance' as relation, device_id, verdict
from marts.fleet_compliance
where verdict is null
    or verdict not in ('compliant', 'non_compliant', 'unverified', 'out_of_service')

union all

select 'marts.stale_devices' as relation, device_id, verdict
from marts.stale_devices
where verdict is null
    or verdict not in ('compliant', 'non_compliant', 'unverified', 'out_of_service')
