-- Macros shared by the models, created by pipelines/build/models.py (schema `main`) before staging.
-- Each is written once here so a rule (how versions compare, how a URL becomes an id) has a
-- single home.

-- clean_text(x): trimmed text, empty string -> NULL. Works on VARCHAR and on JSON scalars.
create or replace macro clean_text(x) as
    nullif(trim(cast(x as varchar)), '');

-- as_timestamptz(x): TIMESTAMPTZ from TIMESTAMPTZ or ISO-8601 text; empty or unparseable -> NULL.
-- (A TIMESTAMPTZ column passes through at no cost: the fleet's largest tables are timestamps.)
create or replace macro as_timestamptz(x) as
    try_cast(x as timestamptz);

-- as_json(x): JSON from a JSON column or from VARCHAR holding JSON; empty or invalid -> NULL.
create or replace macro as_json(x) as
    try_cast(x as json);

-- ref_id(x): the id a record links to. Legacy records link by URL
-- (`https://…/enterprise/{eid}/device/{uuid}/`): the last path segment is the id.
-- A bare id passes through unchanged.
-- (A bare id, the common case on the largest tables, skips the regular expression.) It trims and
-- turns empty text into NULL itself: wrap it in clean_text and the nested macros expand into
-- an expression ~3x as costly where a filter tests it (0.19 s against 0.06 s on 1.6M app rows).
create or replace macro ref_id(x) as
    case
        when contains(cast(x as varchar), '/')
            then nullif(regexp_extract(trim(cast(x as varchar)), '([^/]+)/*$', 1), '')
        else nullif(trim(cast(x as varchar)), '')
    end;

-- version_key(v): a version string as a comparable BIGINT[6], compared part by part as numbers.
-- The first run of dot-separated digits is used ('Android 13' -> 13, '16.4.1 (20E252)' -> 16.4.1,
-- '7.2.1-rc3' -> 7.2.1), padded with zeros to 6 parts (so 13 = 13.0 = 13.0.0 and 14.10 > 14.9);
-- parts beyond the 6th are ignored. No digit at all -> NULL.
create or replace macro version_key(v) as
    case
        when regexp_matches(cast(v as varchar), '[0-9]')
            then list_resize(
                list_transform(
                    string_split(regexp_extract(cast(v as varchar), '([0-9]+(\.[0-9]+)*)', 1), '.'),
                    part -> try_cast(part as bigint)
                ),
                6,
                0
            )
    end;

-- utc_date(ts): the calendar day of a timestamp in UTC, whatever the session's TimeZone.
-- Computed from the microseconds since the epoch (days = floor(us / 86,400,000,000)): the same
-- day as timezone('UTC', ts), without a time-zone lookup per row (millions of heartbeats).
create or replace macro utc_date(ts) as
    date '1970-01-01' + cast(floor(epoch_us(ts) / 86400000000) as integer);

-- utc_day_end(d): the last microsecond of UTC day d, as TIMESTAMPTZ (epoch arithmetic, as above).
create or replace macro utc_day_end(d) as
    make_timestamptz((cast(d - date '1970-01-01' as bigint) + 1) * 86400000000 - 1);

-- state_key(text): an API state as sql/vocabulary/work_states.csv spells it ('Command In
-- Progress' -> 'IN_PROGRESS', 'OPERATION_SUCCESS' -> 'SUCCESS'); sources/esper/vocabulary.py
-- does the same in Python.
create or replace macro state_key(raw_state) as
    regexp_replace(
        regexp_replace(upper(trim(raw_state)), '^(COMMAND\s+|OPERATION_)', ''), '\s+', '_', 'g'
    );

-- tidy_state(kind, text): the tidy state of an API state (kind: command, operation,
-- operation_device), 'unknown' when the vocabulary does not know it.
create or replace macro tidy_state(state_kind, raw_state) as
    coalesce(
        (
            select vocabulary.state
            from seeds.work_states as vocabulary
            where vocabulary.kind = state_kind
                and vocabulary.api_state = state_key(raw_state)
        ),
        'unknown'
    );

-- A tidy state that can no longer change (seeds.work_states.is_terminal, the loader's list too).
create or replace macro is_terminal_state(tidy) as
    tidy in (select state from seeds.work_states where is_terminal = 'true');

-- The thresholds the headlines and the Esper Pipelines flags are judged by, each written once:
-- the marts compare with them and the headline labels print them (`status`, the demo and the
-- notebooks show those labels, never a number of their own). Edit one, then rebuild the models.
-- (The last-seen boundaries are the admin's targets: sql/seeds/last_seen_buckets.csv.)
create or replace macro low_battery_below_pct() as 15;
create or replace macro pipeline_stalled_after_hours() as 24;
create or replace macro pipeline_failing_share() as 0.10;
-- A rollout is ranked among the worst (failing_rank) from this many target devices: one failed
-- device out of one would top the list.
create or replace macro rollout_ranked_from_devices() as 5;
-- An app version rollout is current (the headline slowest_app_rollout) when the version is the
-- latest of its app on its platform and first appeared in the fleet this many days before now.
create or replace macro app_rollout_current_days() as 30;

-- as_label(x): a number as a label prints it, without trailing zeros (24.0 -> '24', 0.5 -> '0.5').
create or replace macro as_label(x) as
    format('{:g}', cast(x as double));

-- age_label(older, newer): how much older one API time is than another, as the age notes print it
-- ('5 h old', '3 days old'): whole hours under two days, else whole days.
create or replace macro age_label(older, newer) as
    case
        when epoch(newer - older) < 48 * 3600
            then cast(floor(epoch(newer - older) / 3600) as bigint) || ' h old'
        else cast(floor(epoch(newer - older) / 86400) as bigint) || ' days old'
    end;

-- A table is held back in `status`'s freshness block (a warning, exit 7) once it is this many
-- hours older than the warehouse's "now": two scheduled nights.
create or replace macro freshness_warn_after_hours() as 48;
