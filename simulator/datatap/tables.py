"""The Data Tap tables: their DDL and the daily snapshot of the fleet that fills them.

One row per entity per ``report_date`` in each table (``devices``, ``device_apps``,
``groups``, ``device_stats``, ``users``), with ``report_generation_timestamp``; columns and
types as the live client relied on (live-observations section 19, see the package docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
from esper_warehouse.simulator import catalog as C

if TYPE_CHECKING:
    from esper_warehouse.simulator.fleet import Fleet
    from esper_warehouse.simulator.state import World

DDL = """
create table devices (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, name varchar, os varchar, platform varchar, os_version varchar,
    state varchar, group_id varchar, security_patch_level date, agent_version varchar,
    blueprint_id varchar, blueprint_version integer, blueprint_upgrade_status varchar,
    is_gms boolean, hardware_info varchar, last_seen varchar, created_at timestamptz,
    updated_at timestamptz);
create table device_apps (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, package_name varchar, app_name varchar, version_name varchar,
    version_code varchar, updated_at timestamptz);
create table groups (report_date date, report_generation_timestamp timestamptz,
    group_id varchar, group_name varchar, path varchar, parent_id varchar, device_count integer);
create table device_stats (report_date date, report_generation_timestamp timestamptz,
    device_id varchar, battery_level varchar, latitude varchar, longitude varchar,
    memory_stats varchar, battery_stats varchar, network_stats varchar, location_stats varchar);
create table users (report_date date, report_generation_timestamp timestamptz,
    user_id varchar, role_name varchar, created_at timestamptz);
"""

# `devices.state` as the live Data Tap table names it (a provisioning state, not the API's code).
_PROVISIONING_STATE = {0: "UNSPECIFIED", 1: "PROVISIONED", 60: "PROVISIONED", 200: "PROVISIONED",
                       20: "DISABLED", 70: "WIPE_IN_PROGRESS"}  # fmt: skip
_ROLES = ("Enterprise Admin", "Group Viewer", "Group Admin", "Viewer")


def _provisioning_state(code: int) -> str:
    if code in _PROVISIONING_STATE:
        return _PROVISIONING_STATE[code]
    if 30 <= code <= 50:
        return "PROVISIONING"
    return "ONBOARDING" if code <= 100 else "APPLYING_BLUEPRINT"


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


_TZ = pa.timestamp("s", tz="UTC")
Stamp = Callable[[int], dict[str, pa.Array]]  # row count -> the two report columns


def _col(values: list[Any], typ: pa.DataType) -> pa.Array:
    return pa.array(values, type=typ)


def snapshot_tables(world: World, ts: int, day: int, users_created: int) -> dict[str, pa.Table]:
    """Every Data Tap table as of ``ts``, reported as the day starting at ``day``.

    ``users_created`` is the ``created_at`` of every user row.
    """
    f = world.fleet
    rd = datetime.fromtimestamp(day, UTC).date()
    generated = datetime.fromtimestamp(ts, UTC)  # report_generation_timestamp
    live = f.live()

    def stamp(count: int) -> dict[str, pa.Array]:
        return {
            "report_date": _col([rd] * count, pa.date32()),
            "report_generation_timestamp": _col([generated] * count, _TZ),
        }

    devices = _devices_table(f, live, stamp)
    device_apps = _device_apps_table(f, live, stamp)
    groups = _groups_table(f, world.group_counts(), stamp)
    stats = pa.table({**stamp(len(live)), **_device_stats(f, live, ts)})
    users = _users_table(f, users_created, stamp)
    return {
        "devices": devices,
        "device_apps": device_apps,
        "groups": groups,
        "device_stats": stats,
        "users": users,
    }


def _devices_table(f: Fleet, live: list[int], stamp: Stamp) -> pa.Table:
    """`devices`: state as a provisioning state, last_seen and hardware_info as text."""
    ls = [f.last_seen[i] if f.last_seen[i] >= 0 else None for i in live]
    patch = [
        date.fromisoformat(f.patch_levels[f.patch[i]]) if f.patch[i] >= 0 else None for i in live
    ]
    return pa.table(
        {
            **stamp(len(live)),
            "device_id": _col([f.ids[i] for i in live], pa.string()),
            "name": _col([f.name[i] for i in live], pa.string()),
            "os": _col([C.OS_NAMES[f.os[i]] for i in live], pa.string()),
            "platform": _col([C.PLATFORMS[C.OS_PLATFORM[f.os[i]]] for i in live], pa.string()),
            "os_version": _col([C.OS_VERSIONS[f.os[i]][f.osv[i]][0] for i in live], pa.string()),
            "state": _col([_provisioning_state(f.state[i]) for i in live], pa.string()),
            "group_id": _col(
                [f.groups[f.group[i]].id if f.group[i] != C.NO_GROUP else None for i in live],
                pa.string(),
            ),
            "security_patch_level": _col(patch, pa.date32()),
            "agent_version": _col(
                [C.AGENTS[C.OS_PLATFORM[f.os[i]]][f.agent[i]][0] for i in live], pa.string()
            ),
            "blueprint_id": _col([f.blueprints[f.bp_current[i]].id for i in live], pa.string()),
            "blueprint_version": _col(
                [f.bp_versions[f.bp_ver[i]][1] + 1 for i in live], pa.int32()
            ),
            "blueprint_upgrade_status": _col(
                [C.UPGRADE_STATUSES[f.bp_status[i]] for i in live], pa.string()
            ),
            "is_gms": _col([f.is_gms[i] for i in live], pa.bool_()),
            "hardware_info": _col(
                [
                    _json({"serialNumber": f.serial[i], "manufacturer": C.OS_NAMES[f.os[i]]})
                    for i in live
                ],
                pa.string(),
            ),
            # text, as live: "2026-10-01 09:30:00" (cast it with try_cast)
            "last_seen": _col(
                [
                    datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d %H:%M:%S") if x else None
                    for x in ls
                ],
                pa.string(),
            ),
            "created_at": _col([f.created[i] for i in live], _TZ),
            "updated_at": _col([f.updated[i] for i in live], _TZ),
        }
    )


def _device_apps_table(f: Fleet, live: list[int], stamp: Stamp) -> pa.Table:
    """`device_apps`: one row per installed app, from the catalogue of the device's platform."""
    app_rows: dict[str, list[Any]] = {k: [] for k in ("device_id", "package_name", "app_name")}
    app_rows.update({"version_name": [], "version_code": [], "updated_at": []})
    for i in live:
        cat = f.legacy_apps if C.OS_PLATFORM[f.os[i]] == C.ANDROID else f.tenant_apps
        for k, v, _c, u in f.apps[i]:
            app = cat[k]
            app_rows["device_id"].append(f.ids[i])
            app_rows["package_name"].append(app.package)
            app_rows["app_name"].append(app.name)
            app_rows["version_name"].append(app.versions[v].name)
            app_rows["version_code"].append(app.versions[v].code)
            app_rows["updated_at"].append(u)
    return pa.table(
        {
            **stamp(len(app_rows["device_id"])),
            **{k: _col(vals, pa.string()) for k, vals in app_rows.items() if k != "updated_at"},
            "updated_at": _col(app_rows["updated_at"], _TZ),
        }
    )


def _groups_table(f: Fleet, counts: list[int], stamp: Stamp) -> pa.Table:
    """`groups`: every group with its parent and the devices directly in it."""
    return pa.table(
        {
            **stamp(len(f.groups)),
            "group_id": _col([g.id for g in f.groups], pa.string()),
            "group_name": _col([g.name for g in f.groups], pa.string()),
            "path": _col([g.path for g in f.groups], pa.string()),
            "parent_id": _col(
                [f.groups[g.parent].id if g.parent >= 0 else None for g in f.groups],
                pa.string(),
            ),
            "device_count": _col(counts, pa.int32()),
        }
    )


def _users_table(f: Fleet, created: int, stamp: Stamp) -> pa.Table:
    """`users`: ids and role names (no display names), all created at ``created``."""
    n = len(f.users)
    return pa.table(
        {
            **stamp(n),
            "user_id": _col(list(f.users), pa.string()),
            "role_name": _col([_ROLES[k % len(_ROLES)] for k in range(n)], pa.string()),
            "created_at": _col([created] * n, _TZ),
        }
    )


def _device_stats(f: Any, live: list[int], ts: int) -> dict[str, pa.Array]:
    """`device_stats` columns: figures as text, blobs as JSON text (live-observations §19)."""
    ids, battery, lat, lon, memory, battery_blob, network, location = ([] for _ in range(8))
    for i in live:
        # a fixed place and memory size per device, drawn from its id; battery from the fleet
        h = int(f.ids[i][:8], 16)
        la, lo = round(-40 + (h % 8000) / 100, 5), round(-120 + (h // 8000 % 24000) / 100, 5)
        total = (2 + h % 7) * 1024**3
        ids.append(f.ids[i])
        battery.append(str(f.battery[i]) if f.battery[i] is not None else None)
        lat.append(str(la))
        lon.append(str(lo))
        memory.append(_json({"units": "BYTE", "total_ram": total,
                             "available_ram": total * (20 + h % 60) // 100}))  # fmt: skip
        battery_blob.append(_json({"level": f.battery[i], "charging": bool(h % 3 == 0)}))
        network.append(_json({"network_type": "WIFI" if h % 4 else "MOBILE",
                              "signal_strength": -40 - h % 50}))  # fmt: skip
        location.append(_json({"latitude": la, "longitude": lo}))
    text = pa.string()
    return {
        "device_id": pa.array(ids, text),
        "battery_level": pa.array(battery, text),
        "latitude": pa.array(lat, text),
        "longitude": pa.array(lon, text),
        "memory_stats": pa.array(memory, text),
        "battery_stats": pa.array(battery_blob, text),
        "network_stats": pa.array(network, text),
        "location_stats": pa.array(location, text),
    }
