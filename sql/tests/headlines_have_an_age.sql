-- Every headline names the table families it reads (the headline_families CTE of
-- sql/marts/headlines.sql): without them it has no age, and an unknown number would read as a
-- number. Offending rows: the headline without an age.
select distinct
    headline,
    'add ' || headline || ' to headline_families in sql/marts/headlines.sql' as problem,
from marts.headlines
where is_known is null
