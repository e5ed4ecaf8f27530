-- Every reason of marts.fleet_compliance carries a code of sql/vocabulary/reason_codes.csv (the
-- one home of the codes: a code the SQL gives and the vocabulary lacks would be counted under no
-- label). Offending rows: the code and how many reasons carry it.
select
    'a reason code missing from sql/vocabulary/reason_codes.csv: ' || coalesce(code, 'NULL')
        || ' (' || count(*) || ' reasons)' as problem,
from marts.fleet_compliance, unnest(reason_codes) as r(code)
where code is null or code not in (select reason_code from seeds.reason_codes)
group by code
