"""The fast device x day spine agrees with its plain definition, on a synthetic warehouse.

int_device_days builds the spine from version ranges (no as-of join per device-day) and keeps
the required-app counts; these tests recompute the same facts the slow, obvious way (an as-of
join per device-day, a range join per install) on 2,000 synthetic devices and compare row by row.
They also check that fleet_compliance_daily's as_of day equals fleet_compliance, and that
int_device_required_apps (the required packages ranked alone) agrees with int_device_app_latest.
"""

from __future__ import annotations

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import SQL_DIR, build_models

from tests.sql.synthetic import fill

REFERENCE_SPINE = """
with
as_of as (select * from intermediate.int_as_of),
spine as (
    select
        spans.device_id,
        cast(unnest(generate_series(spans.first_day, spans.last_day, interval 1 day)) as date)
            as day,
    from intermediate.int_device_spans as spans
),
with_cutoff as (
    select
        spine.device_id,
        spine.day,
        least(
            timezone('UTC', cast(spine.day as timestamp) + interval 1 day) - interval 1 microsecond,
            as_of.as_of
        ) as cutoff_at,
    from spine
    cross join as_of
),
version_picked as (
    select with_cutoff.*, versions.updated_at as version_updated_at,
    from with_cutoff
    asof join intermediate.int_device_versions as versions
        on versions.device_id = with_cutoff.device_id
        and versions.updated_at <= with_cutoff.cutoff_at
),
heartbeat_picked as (
    select version_picked.*, heartbeats.seen_at as heartbeat_at,
    from version_picked
    asof left join (
        select device_id, seen_at from staging.stg_esper__heartbeats
        where device_id is not null and seen_at is not null
    ) as heartbeats
        on heartbeats.device_id = version_picked.device_id
        and heartbeats.seen_at <= version_picked.cutoff_at
),
required_rows as (
    select
        apps.device_id,
        apps.package_name,
        required.platform,
        coalesce(apps.version_key >= required.min_version_key, false) as meets_minimum,
        apps.valid_from,
        apps.valid_to,
    from intermediate.int_device_app_versions as apps
    inner join staging.stg_seeds__required_apps as required
        on required.package_name = apps.package_name
),
final as (
    select
        picked.device_id,
        picked.day,
        picked.cutoff_at,
        versions.platform,
        versions.group_id,
        picked.version_updated_at,
        greatest(
            picked.heartbeat_at,
            case when versions.last_seen_at <= picked.cutoff_at then versions.last_seen_at end
        ) as last_seen_at,
        (
            select count(distinct r.package_name)
            from required_rows as r
            where r.device_id = picked.device_id
                and r.platform = versions.platform
                and r.valid_from <= picked.cutoff_at
                and (r.valid_to is null or r.valid_to > picked.cutoff_at)
        ) as installed_required_app_count,
        (
            select count(distinct r.package_name)
            from required_rows as r
            where r.device_id = picked.device_id
                and r.platform = versions.platform
                and r.meets_minimum
                and r.valid_from <= picked.cutoff_at
                and (r.valid_to is null or r.valid_to > picked.cutoff_at)
        ) as current_required_app_count,
    from heartbeat_picked as picked
    inner join intermediate.int_device_versions as versions
        on versions.device_id = picked.device_id
        and versions.updated_at = picked.version_updated_at
)
select * from final
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "synthetic.duckdb"
    fill(path, 2_000)
    build_models(path)
    con = duckdb.connect(str(path))
    yield con
    con.close()


def test_spine_matches_as_of_definition(synthetic):
    columns = (
        "device_id, day, cutoff_at, platform, group_id, version_updated_at, last_seen_at, "
        "installed_required_app_count, current_required_app_count"
    )
    built = f"select {columns} from intermediate.int_device_days"
    reference = f"select {columns} from ({REFERENCE_SPINE})"
    rows = synthetic.execute(f"select count(*) from ({built})").fetchone()[0]
    assert rows > 2_000 * 20
    only_built = synthetic.execute(f"select count(*) from ({built} except all {reference})")
    assert only_built.fetchone()[0] == 0
    only_reference = synthetic.execute(f"select count(*) from ({reference} except all {built})")
    assert only_reference.fetchone()[0] == 0


IRREGULAR_HEARTBEATS = """
-- gaps of a day or more, a second heartbeat the same day (or past midnight), one at the very same
-- instant, and heartbeats weeks before the spine starts
delete from esper.heartbeats where hash(device_id, timestamp) % 4 = 0;
insert into esper.heartbeats (device_id, timestamp, status)
select device_id, timestamp + interval 2 hours, status from esper.heartbeats
where hash(device_id, timestamp) % 5 = 0
union all
select device_id, timestamp, status from esper.heartbeats
where hash(device_id, timestamp) % 11 = 0
union all
select device_id, timestamp - interval 60 days, status from esper.heartbeats
where hash(device_id, timestamp) % 13 = 0;
"""


def test_spine_heartbeats_match_as_of_definition_when_irregular(tmp_path):
    # the synthetic fleet checks in once a day until it stops; here the latest heartbeat at a
    # day's end must still be the as-of join's through gaps, repeats and early heartbeats
    path = tmp_path / "irregular.duckdb"
    fill(path, 400)
    with duckdb.connect(str(path)) as con:
        con.execute(IRREGULAR_HEARTBEATS)
    build_models(path)
    columns = "device_id, day, cutoff_at, last_seen_at"
    built = f"select {columns} from intermediate.int_device_days"
    reference = f"select {columns} from ({REFERENCE_SPINE})"
    with duckdb.connect(str(path)) as con:
        assert con.execute(f"select count(*) from ({built})").fetchone()[0] > 400 * 20
        for left, right in ((built, reference), (reference, built)):
            only = con.execute(f"select count(*) from ({left} except all {right})")
            assert only.fetchone()[0] == 0


def test_daily_as_of_day_equals_fleet_compliance(synthetic):
    daily = synthetic.execute(
        """
        select platform, group_id, devices, compliant_devices, non_compliant_devices,
            unverified_devices
        from marts.fleet_compliance_daily
        where day = (select as_of_date from intermediate.int_as_of)
        order by all
        """
    ).fetchall()
    current = synthetic.execute(
        """
        select platform, group_id, count(*),
            count(*) filter (where verdict = 'compliant'),
            count(*) filter (where verdict = 'non_compliant'),
            count(*) filter (where verdict = 'unverified')
        from marts.fleet_compliance
        group by all
        order by all
        """
    ).fetchall()
    assert daily == current
    assert sum(row[2] for row in daily) > 1_900


def test_required_apps_agree_with_latest_apps(synthetic):
    required = "select * from intermediate.int_device_required_apps"
    from_latest = (
        "select * from intermediate.int_device_app_latest "
        "where package_name in (select package_name from staging.stg_seeds__required_apps)"
    )
    rows = synthetic.execute(f"select count(*) from ({required})").fetchone()[0]
    assert rows > 1_000
    for left, right in ((required, from_latest), (from_latest, required)):
        only = synthetic.execute(f"select count(*) from ({left} except all {right})")
        assert only.fetchone()[0] == 0


def test_fleet_compliance_never_expands_the_history(synthetic):
    # fleet_compliance keeps is_as_of_day rows; DuckDB must drop int_device_days' history branch
    # (the per-day expansion and the heartbeats it reads: the as_of day takes the latest
    # heartbeat from int_device_ranges), or the mart judges every day again
    def plan(mart: str) -> str:
        body = (SQL_DIR / "marts" / f"{mart}.sql").read_text().strip().rstrip(";")
        return synthetic.execute(f"explain (format json) {body}").fetchall()[0][1]

    assert "heartbeats" in plan("fleet_compliance_daily")
    assert "heartbeats" not in plan("fleet_compliance")
