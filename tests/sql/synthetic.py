"""A synthetic warehouse at fleet scale, to time the model build.

`python -m tests.sql.synthetic --devices 100000` fills a warehouse with N devices (70 % Android,
15 % Apple, 10 % Windows, 5 % Linux), their version history over 30 days (~2 % change a day),
a daily heartbeat per checked-in device, 15 apps per device (10 % updated during the month),
groups, blueprints, command requests with statuses and operations with per-device records, then
builds the models and prints the time each layer took. Rows are generated in DuckDB SQL (hash-based
pseudo-randomness, deterministic), in the contract's raw tables (pipelines/build/raw_contract.py).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from esper_warehouse.pipelines.build import models as pipeline_models
from esper_warehouse.pipelines.build.models import build_models, create_macros, load_vocabulary

from tests.sql.rawdata import create_raw_tables

AS_OF = "2026-10-31 12:00:00+00"
DAYS = 30
APPS_PER_DEVICE = 15

_FILL = """
create temp table gen_devices as
select
    i,
    'dev-' || i as id,
    case when hash(i, 'p') % 100 < 70 then 'ANDROID'
         when hash(i, 'p') % 100 < 85 then 'APPLE'
         when hash(i, 'p') % 100 < 95 then 'WINDOWS'
         else 'LINUX' end as platform,
    'grp-' || (hash(i, 'g') % 50) as group_id,
    'bp-' || (hash(i, 'b') % 10) as blueprint_id,
    timestamptz '{as_of}' - to_seconds(cast(hash(i, 'u') % (60 * 86400) as bigint)) as updated_at,
    -- 3 % never seen, else last seen up to ~40 days ago, most within the day
    case when hash(i, 's') % 100 < 3 then null
         when hash(i, 's') % 100 < 80
             then timestamptz '{as_of}' - to_seconds(cast(hash(i, 'l') % 86400 as bigint))
         else timestamptz '{as_of}' - to_seconds(cast(hash(i, 'l') % (40 * 86400) as bigint))
    end as last_seen
from range({n}) as t(i);

insert into esper.devices (
    id, name, alias, os, platform, state, state_text, serial, os_version, group_id, tags,
    is_gms, dpc_version, created_at, updated_at, provisioned_on, last_seen,
    hardware_info__brand, hardware_info__model, hardware_info__manufacturer,
    software_info__security_patch_level, software_info__os_build_number,
    software_info__esper_agent_info__version_name, blueprint_info__assigned_blueprint_id,
    blueprint_info__current_blueprint_id, blueprint_info__current_blueprint_version_id,
    blueprint_info__blueprint_upgrade_status, battery_stats__battery_level
)
select
    id, 'name-' || i, null,
    case platform when 'ANDROID' then 'Android' when 'APPLE' then 'iOS'
         when 'WINDOWS' then 'Windows' else 'Linux' end,
    platform, 1, null, 'SN' || i,
    case platform
        when 'ANDROID' then cast(10 + hash(i, 'o') % 5 as varchar)
        when 'APPLE' then cast(16 + hash(i, 'o') % 3 as varchar) || '.' || cast(hash(i, 'm') % 6 as varchar)
        when 'WINDOWS' then case when hash(i, 'o') % 2 = 0 then '10.0.19045' else '10.0.22631' end
        else '22.04' end,
    group_id, '[]', true, null,
    timestamptz '2026-01-01 00:00:00+00', updated_at, timestamptz '2026-01-01 00:00:00+00',
    case when platform = 'ANDROID' then null else last_seen end,
    'Brand', 'Model', 'Maker',
    case when platform = 'ANDROID'
        then cast(date '2026-10-05' - cast(hash(i, 'sp') % 200 as integer) as varchar) end,
    'B' || i,
    case when platform = 'ANDROID' then '7.' || cast(hash(i, 'a') % 4 as varchar) || '.0' end,
    blueprint_id,
    case when hash(i, 'd') % 50 = 0 then 'bp-x' else blueprint_id end,
    blueprint_id || '-v' || cast(case when hash(i, 'v') % 10 = 0 then 2 else 3 end as varchar),
    case when hash(i, 'f') % 100 = 0 then 'UPGRADE_FAILED' else 'UPGRADED' end,
    cast(hash(i, 'bat') % 100 as bigint)
from gen_devices;

insert into esper.device_history select * from esper.devices;
-- ~2 % of devices change per day: an older version (older OS) of each changed device
insert into esper.device_history by name
select
    * replace (
        updated_at - to_seconds(cast(86400 * (1 + hash(id, 'h') % {days}) as bigint)) as updated_at,
        cast(version_key(os_version)[1] - 1 as varchar) as os_version
    )
from esper.devices
where hash(id, 'c') % 100 < 2 * {days} / 2;

insert into esper.device_census (
    id, updated_at, census_at
)
select id, updated_at, timestamptz '{as_of}' - interval 1 hour
from esper.devices where hash(id, 'rm') % 500 <> 0;

-- one heartbeat per day per device that checked in that day
insert into esper.heartbeats (
    device_id, timestamp, status
)
select g.id, timestamptz '{as_of}' - to_days(cast(d as integer)) - to_seconds(cast(hash(g.i, d) % 3600 as bigint)), 1
from gen_devices as g, range({days}) as r(d)
where g.last_seen is not null
    and timestamptz '{as_of}' - to_days(cast(d as integer)) <= g.last_seen + interval 1 hour;

insert into esper.groups (
    id, name, parent, path, device_count, children_count, blueprint, created_on, enterprise
)
select 'grp-' || i, 'Group ' || i, null, 'All devices/Region ' || (i % 5) || '/Group ' || i,
       0, 0, null, timestamptz '2025-01-01 00:00:00+00', null
from range(50) as t(i);

insert into esper.blueprints (
    id, name, version_id, version_number, minor_version_number, publish, settings, created_at,
    updated_at
)
select 'bp-' || i, 'Blueprint ' || i, 'bp-' || i || '-v3', 3, 0, true, '{{}}',
       timestamptz '2026-01-01 00:00:00+00', timestamptz '2026-09-01 00:00:00+00'
from range(10) as t(i);
insert into esper.blueprint_versions (
    id, name, version_id, version_number, minor_version_number, publish, settings, created_at,
    updated_at
)
select 'bp-' || i, 'Blueprint ' || i, 'bp-' || i || '-v' || v, v, 0, true, '{{}}',
       timestamptz '2026-01-01 00:00:00+00' + to_days(cast(60 * v as integer)), null
from range(10) as t(i), range(1, 4) as r(v);

-- 15 apps per device; 10 % of them updated during the month (old row closed, new row open)
create temp table gen_apps as
select
    g.id as device_id,
    g.platform,
    case when a = 0 and g.platform = 'ANDROID' then 'io.esper.remoteviewer'
         when a = 1 and g.platform = 'ANDROID' then 'com.android.chrome'
         when a = 0 and g.platform = 'APPLE' then 'com.microsoft.Outlook'
         when a = 0 and g.platform = 'WINDOWS' then 'Microsoft.CompanyPortal'
         else 'com.example.app' || a end as package_name,
    a,
    hash(g.i, a) % 10 = 0 as was_updated,
    timestamptz '{as_of}' - to_seconds(cast(hash(g.i, a, 'w') % ({days} * 86400) as bigint)) as changed_at
from gen_devices as g, range({apps}) as r(a)
where hash(g.i, 'noapps') % 50 <> 0;

insert into esper.device_apps (
    id, device_id, route, package_name, app_name, version_code, version_name, app_id,
    app_version_id, app_type, bundle_id, apple_app_version, state, is_active, created_on,
    updated_on, created_at, updated_at, _dlt_valid_from, _dlt_valid_to
)
select
    device_id || ':' || package_name || ':new', device_id,
    case when platform = 'ANDROID' then 'legacy' else 'v2' end,
    package_name, 'App ' || a, null,
    cast(100 + a as varchar) || '.' || cast(case when was_updated then 2 else 1 end as varchar) || '.0',
    null, null, null, null, null, 'installed', true, null, null, null, null,
    case when was_updated then changed_at else timestamptz '2026-09-01 00:00:00+00' end,
    null
from gen_apps;
insert into esper.device_apps (
    id, device_id, route, package_name, app_name, version_code, version_name, app_id,
    app_version_id, app_type, bundle_id, apple_app_version, state, is_active, created_on,
    updated_on, created_at, updated_at, _dlt_valid_from, _dlt_valid_to
)
select
    device_id || ':' || package_name || ':old', device_id,
    case when platform = 'ANDROID' then 'legacy' else 'v2' end,
    package_name, 'App ' || a, null, cast(100 + a as varchar) || '.1.0',
    null, null, null, null, null, 'installed', true, null, null, null, null,
    timestamptz '2026-09-01 00:00:00+00', changed_at
from gen_apps where was_updated;

insert into esper._esper_runs (
    run_id, started_at, finished_at, as_of, mode, status, requests, retries, throttled, rows
)
select 'run-' || d, null, null, timestamptz '{as_of}' - to_days(cast(d as integer)),
       'incremental', 'ok', 0, 0, 0, '{{}}'
from range({days} + 1) as r(d);

-- commands: 10 a day, ~100 target devices each
insert into esper.command_requests (
    id, command_type, command, command_args, devices, groups, device_type, schedule, reason,
    alias, created_by, created_at
)
select 'req-' || r, 'DEVICE', 'REBOOT', '{{}}', '[]', '[]', 'all', 'IMMEDIATE', null, null,
       'admin',
       timestamptz '{as_of}' - to_seconds(cast(hash(r, 'c') % ({days} * 86400) as bigint))
from range(10 * {days}) as t(r);
insert into esper.command_statuses (
    id, request, device, state, reason, created_at, updated_at
)
select
    'st-' || r || '-' || k, 'req-' || r, 'dev-' || (hash(r, k) % {n}),
    case hash(r, k, 's') % 10 when 0 then 'Command Failure' when 1 then 'Command TimeOut'
         when 2 then 'Command Queued' else 'Command Success' end,
    case when hash(r, k, 's') % 10 = 0 then 'reason ' || (hash(r, k) % 3) end,
    q.created_at, q.created_at + to_seconds(cast(hash(r, k, 'd') % 7200 as bigint))
from range(10 * {days}) as t(r), range(100) as u(k), esper.command_requests as q
where q.id = 'req-' || r;

insert into esper.operations (
    id, operation, state, alias, reason, schedule_type, created_at, updated_at,
    operation_stats, operation_activity
)
select 'op-' || r, 'INSTALL_APP', 'COMPLETED', null, null, 'IMMEDIATE',
       timestamptz '{as_of}' - to_days(cast(r % {days} as integer)),
       timestamptz '{as_of}' - to_days(cast(r % {days} as integer)), '{{}}', '[]'
from range(3 * {days}) as t(r);
insert into esper.operation_devices (
    id, operation_id, device_id, state, reason, created_at, updated_at,
    device_operation_activity
)
select 'od-' || r || '-' || k, 'op-' || r, 'dev-' || (hash(r, k, 'o') % {n}),
       case hash(r, k) % 10 when 0 then 'FAILED' when 1 then 'CREATED' else 'SUCCEDED' end,
       null, o.created_at, o.created_at + to_seconds(cast(hash(r, k) % 3600 as bigint)), '[]'
from range(3 * {days}) as t(r), range(100) as u(k), esper.operations as o
where o.id = 'op-' || r;
"""


def fill(path: Path, devices: int) -> dict[str, int]:
    """Create the raw tables in `path` and fill them; return row counts per raw table."""
    con = duckdb.connect(str(path))
    try:
        create_raw_tables(con)
        # version_key is needed while generating; the runner recreates it identically
        load_vocabulary(con)
        create_macros(con)
        schema_sql = _FILL.format(as_of=AS_OF, n=devices, days=DAYS, apps=APPS_PER_DEVICE)
        catalog = con.execute("select current_database()").fetchone()[0]
        # qualify the raw tables (not the `esper.` inside literals such as 'io.esper.remoteviewer')
        con.execute(re.sub(r"(?<![\w.'])esper\.", f'"{catalog}".esper.', schema_sql))
        tables = con.execute(
            "select table_name from information_schema.tables where table_schema = 'esper' "
            "order by 1"
        ).fetchall()
        return {
            name: con.execute(f'select count(*) from "{catalog}".esper.{name}').fetchone()[0]
            for (name,) in tables
        }
    finally:
        con.close()


@contextmanager
def layer_times() -> Iterator[dict[str, list[float]]]:
    """Collect [wall s, CPU s] per layer while build_models runs (wraps its per-model step)."""
    times: dict[str, list[float]] = {}
    build_model = pipeline_models._build_model

    def timed(con, model, *rest):
        started, cpu = time.perf_counter(), os.times()
        build_model(con, model, *rest)
        after = os.times()
        spent = times.setdefault(model.layer, [0.0, 0.0])
        spent[0] += time.perf_counter() - started
        spent[1] += (after.user - cpu.user) + (after.system - cpu.system)

    pipeline_models._build_model = timed
    try:
        yield times
    finally:
        pipeline_models._build_model = build_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=100_000)
    parser.add_argument("--warehouse", type=Path, help="file to fill (default: a temporary file)")
    args = parser.parse_args(argv)
    path = args.warehouse or Path(tempfile.mkdtemp()) / "synthetic.duckdb"
    started = time.perf_counter()
    counts = fill(path, args.devices)
    print(f"filled {path} in {time.perf_counter() - started:.1f} s:", flush=True)
    for table, rows in counts.items():
        print(f"  esper.{table}: {rows:,} rows")
    started, cpu = time.perf_counter(), os.times()
    with layer_times() as layers:
        built = build_models(path)
    wall, after = time.perf_counter() - started, os.times()
    cpu_seconds = (after.user - cpu.user) + (after.system - cpu.system)
    load = os.getloadavg()[0]
    print(
        f"built {len(built)} relations in {wall:.2f} s wall, {cpu_seconds:.2f} s CPU "
        f"({os.cpu_count()} cores, load average {load:.1f})",
        flush=True,
    )
    for layer, (layer_wall, layer_cpu) in layers.items():
        print(f"  {layer}: {layer_wall:.2f} s wall, {layer_cpu:.2f} s CPU")
    other = wall - sum(layer_wall for layer_wall, _ in layers.values())
    print(f"  seeds, macros, placeholders and commit: {other:.2f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
