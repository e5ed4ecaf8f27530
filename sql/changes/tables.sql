-- changes.change_log: one row per change a build found (found.sql), appended once per as-of.
create table if not exists changes.change_log (
    as_of timestamptz,
    since timestamptz,
    change varchar,
    family varchar,
    subject_kind varchar,
    subject_id varchar,
    subject_name varchar,
    before varchar,
    after varchar,
    reason varchar
);

-- changes.family_states: each compared family's as-of at each snapshot (the last two kept).
create table if not exists changes.family_states (
    as_of timestamptz,
    family varchar,
    family_label varchar,
    data_as_of timestamptz,
    is_current boolean,
    reason varchar
);

-- changes.comparisons: one row per as-of a build compared with a previous snapshot (since), with
-- or without changes: the nights a digest covers ("nothing changed" is a night too).
create table if not exists changes.comparisons (
    as_of timestamptz,
    since timestamptz
);
