"""Fixture fleets with hand-computed answers (the tests state the answers next to the asserts).

Every scenario reads at AS_OF (the last successful run); a failed run after it must be ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

AS_OF = "2026-10-31T12:00:00+00:00"
CENSUS_AT = "2026-10-31T11:00:00+00:00"
ROLLOUT_START = "2026-10-20T00:00:00+00:00"


def runs(first_as_of: str) -> list[dict]:
    return [
        {"run_id": "r1", "as_of": first_as_of, "mode": "full", "status": "ok"},
        {"run_id": "r2", "as_of": AS_OF, "mode": "incremental", "status": "ok"},
        # a later failed run: its as_of must not become "now"
        {"run_id": "r3", "as_of": "2026-11-05T00:00:00+00:00", "status": "failed"},
    ]


def android(device_id: str, **overrides: object) -> dict:
    """An Android device that passes every check (ANDROID targets in sql/seeds)."""
    row = {
        "id": device_id,
        "name": f"name-{device_id}",
        "os": "Android",
        "platform": "ANDROID",
        "state": 1,
        "serial": f"SN-{device_id}",
        "os_version": "14",
        "group_id": "g-stores",
        "tags": [],
        "is_gms": True,
        "created_at": "2026-09-01T00:00:00+00:00",
        "updated_at": "2026-09-20T00:00:00+00:00",
        "software_info__security_patch_level": "2026-09-05",
        "software_info__esper_agent_info__version_name": "7.2.0",
        "blueprint_info__assigned_blueprint_id": "bp-1",
        "blueprint_info__current_blueprint_id": "bp-1",
        "blueprint_info__current_blueprint_version_id": "bpv-2",
        "blueprint_info__blueprint_upgrade_status": "UPGRADED",
    }
    row.update(overrides)
    return row


def app(device_id: str, package: str, version: str, valid_from: str, valid_to: str | None = None):
    return {
        "id": f"{device_id}:{package}:{valid_from}",
        "device_id": device_id,
        "route": "legacy",
        "package_name": package,
        "app_name": package.rsplit(".", 1)[-1],
        "version_name": version,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def apple_store_app(device_id: str, bundle_id: str, version: str, valid_from: str) -> dict:
    """An App Store (VPP) app as the v2 device-apps route serves it (live §9): the package and
    version are only in `bundle_id` and `apple_app_version`; no tenant app knows it."""
    return {
        **app(device_id, bundle_id, version, valid_from),
        "route": "v2",
        "package_name": None,
        "version_name": None,
        "bundle_id": bundle_id,
        "apple_app_version": version,
        "app_type": "VPP",
    }


def good_apps(device_id: str) -> list[dict]:
    return [
        app(device_id, "io.esper.remoteviewer", "3.1", "2026-09-20T00:00:00+00:00"),
        app(device_id, "com.android.chrome", "130.0.6723.58", "2026-09-20T00:00:00+00:00"),
    ]


def heartbeat(device_id: str, at: str) -> dict:
    return {"device_id": device_id, "timestamp": at, "status": 1}


def compliance() -> dict[str, list[dict]]:
    """16 devices; as of AS_OF: 6 compliant, 7 non_compliant, 3 unverified, 1 removed.

    a-tz also has two history versions: os 12 until 2026-10-14 23:30 UTC-5 (04:30 UTC on the
    15th), then os 14: non_compliant up to and including 2026-10-14, compliant from 2026-10-15.
    """
    devices = compliance_devices()
    tz_v1 = android("a-tz", group_id="g-tz", os_version="12", updated_at="2026-10-01T06:00:00Z")
    history = [dict(d) for d in devices] + [tz_v1]
    heartbeats = compliance_heartbeats(devices)
    apps = compliance_apps(devices)
    return {
        "_esper_runs": runs("2026-10-01T06:00:00+00:00"),
        "devices": devices,
        "device_history": history,
        "device_census": [
            {"id": d["id"], "updated_at": d["updated_at"], "census_at": CENSUS_AT}
            for d in devices
            if d["id"] != "a-removed"
        ],
        "heartbeats": heartbeats,
        "groups": compliance_groups(),
        "blueprints": compliance_blueprints(),
        "blueprint_versions": compliance_blueprint_versions(),
        "device_apps": apps,
    }


def compliance_devices() -> list[dict]:
    """The devices as they are now (a-tz's older version is added in compliance())."""
    return [
        android("a-ok"),
        android("a-never"),
        android("a-31d"),
        android("a-os-13", os_version="13"),
        android("a-os-13.0.1", os_version="13.0.1"),
        android("a-os-12", os_version="12.1"),
        android(
            "a-bp-drift",
            blueprint_info__assigned_blueprint_id="bp-2",
            blueprint_info__current_blueprint_id="bp-1",
        ),
        android("a-bp-old", blueprint_info__current_blueprint_version_id="bpv-1"),
        android("a-patch-old", software_info__security_patch_level="2026-06-01"),
        android("a-no-apps"),
        android("a-no-chrome"),
        android("a-old-chrome"),
        android("a-old-agent", software_info__esper_agent_info__version_name="6.9.9"),
        android("a-removed", group_id="g-removed"),
        android("a-stale"),
        {
            "id": "i-ok",
            "name": "name-i-ok",
            "os": "iOS",
            "platform": "APPLE",
            "os_version": "17.5",
            "group_id": "g-stores",
            "created_at": "2026-09-01T00:00:00+00:00",
            "updated_at": "2026-09-20T00:00:00+00:00",
            "last_seen": "2026-10-31T10:00:00+00:00",
        },
        android(
            "a-tz",
            group_id="g-tz",
            os_version="14",
            updated_at="2026-10-14T23:30:00-05:00",
        ),
    ]


def compliance_heartbeats(devices: list[dict]) -> list[dict]:
    """Android devices online 30 min before AS_OF, except the never-seen, old and stale ones;
    a-tz has one heartbeat a day from 2026-10-01 12:00Z."""
    online = "2026-10-31T11:30:00+00:00"
    heartbeats = [heartbeat(d["id"], online) for d in devices if d["platform"] == "ANDROID"]
    heartbeats = [
        h for h in heartbeats if h["device_id"] not in ("a-never", "a-31d", "a-stale", "a-removed")
    ]
    heartbeats += [
        heartbeat("a-31d", "2026-09-30T12:00:00+00:00"),  # 744 h before AS_OF -> missing
        heartbeat("a-stale", "2026-10-28T12:00:00+00:00"),  # 72 h -> stale, still judged
        heartbeat("a-removed", "2026-10-10T12:00:00+00:00"),
    ]
    start = datetime(2026, 10, 1, 12, tzinfo=UTC)
    heartbeats += [heartbeat("a-tz", (start + timedelta(days=n)).isoformat()) for n in range(30)]
    return heartbeats


def compliance_apps(devices: list[dict]) -> list[dict]:
    """Good apps on every Android device except the three with missing or old apps."""
    apps = []
    for d in devices:
        if d["platform"] != "ANDROID" or d["id"] in ("a-no-apps", "a-no-chrome", "a-old-chrome"):
            continue
        apps += good_apps(d["id"])
    apps += [
        app("a-no-chrome", "io.esper.remoteviewer", "3.1", "2026-09-20T00:00:00+00:00"),
        app("a-old-chrome", "io.esper.remoteviewer", "3.0.1", "2026-09-20T00:00:00+00:00"),
        app("a-old-chrome", "com.android.chrome", "119.0.6045", "2026-09-20T00:00:00+00:00"),
        apple_store_app("i-ok", "com.microsoft.Outlook", "4.2405.0", "2026-09-20T00:00:00+00:00"),
    ]
    return apps


def compliance_groups() -> list[dict]:
    return [
        {"id": "g-stores", "name": "Stores", "path": "All devices/Stores"},
        {
            "id": "g-tz",
            "name": "Chicago",
            "path": "All devices/Chicago",
            "parent": "https://t-api.esper.cloud/api/enterprise/e-1/devicegroup/g-stores/",
        },
        {"id": "g-removed", "name": "Retired", "path": "All devices/Retired"},
    ]


def compliance_blueprints() -> list[dict]:
    """Each blueprint with its latest version (what the API serves)."""
    return [
        {
            "id": "bp-1",
            "name": "Store tablets",
            "version_id": "bpv-2",
            "publish": True,
            "created_at": "2026-08-01T00:00:00Z",
            "updated_at": "2026-09-15T00:00:00Z",
        },
        {
            "id": "bp-2",
            "name": "Kiosk",
            "version_id": "bpv-3",
            "publish": True,
            "created_at": "2026-09-01T00:00:00Z",
            "updated_at": "2026-09-01T00:00:00Z",
        },
    ]


def compliance_blueprint_versions() -> list[dict]:
    return [
        {
            "id": "bp-1",
            "name": "Store tablets",
            "version_id": "bpv-1",
            "version_number": 1,
            "publish": True,
            "created_at": "2026-08-01T00:00:00Z",
        },
        {
            "id": "bp-1",
            "name": "Store tablets",
            "version_id": "bpv-2",
            "version_number": 2,
            "publish": True,
            "created_at": "2026-09-15T00:00:00Z",
        },
        {
            "id": "bp-2",
            "name": "Kiosk",
            "version_id": "bpv-3",
            "version_number": 1,
            "publish": True,
            "created_at": "2026-09-01T00:00:00Z",
        },
    ]


def rollout() -> dict[str, list[dict]]:
    """io.esper.remoteviewer on 5 Android devices, spine 2026-10-20 .. 2026-10-31.

    r1 14.9 throughout; r2 14.9 -> 14.10 at 10-25 10:00Z; r3 14.10 from 10-22, rolled back to 14.9
    at 10-27 00:00Z; r4 never reports apps; r5 reports 14.10 at 10-25 23:30 UTC-5 (10-26 UTC).
    i1 (APPLE) has Outlook from the App Store (VPP: bundle_id, apple_app_version): it counts in the
    APPLE rollout and must not enter Android denominators.
    """
    pkg = "io.esper.remoteviewer"
    devices = [android(f"r{n}") for n in range(1, 6)]
    devices.append(
        {
            "id": "i1",
            "platform": "APPLE",
            "os_version": "17.5",
            "updated_at": "2026-09-20T00:00:00+00:00",
            "last_seen": "2026-10-31T11:00:00+00:00",
        }
    )
    apps = [
        app("r1", pkg, "14.9", "2026-10-18T00:00:00+00:00"),
        app("r2", pkg, "14.9", "2026-10-18T00:00:00+00:00", "2026-10-25T10:00:00+00:00"),
        app("r2", pkg, "14.10", "2026-10-25T10:00:00+00:00"),
        app("r3", pkg, "14.10", "2026-10-22T00:00:00+00:00", "2026-10-27T00:00:00+00:00"),
        app("r3", pkg, "14.9", "2026-10-27T00:00:00+00:00"),
        app("r5", pkg, "14.10", "2026-10-25T23:30:00-05:00"),
        apple_store_app("i1", "com.microsoft.Outlook", "4.2405.0", "2026-10-18T00:00:00+00:00"),
    ]
    return {
        "_esper_runs": runs(ROLLOUT_START),
        "devices": devices,
        "device_history": [dict(d) for d in devices],
        "heartbeats": [heartbeat(f"r{n}", "2026-10-31T11:00:00+00:00") for n in range(1, 6)],
        "device_apps": apps,
    }


def commands() -> dict[str, list[dict]]:
    """Three command requests and two operations with known counts and durations."""
    day = "2026-10-30T"
    return {
        "_esper_runs": runs("2026-10-01T06:00:00+00:00"),
        "command_requests": command_requests(day),
        "command_statuses": command_statuses(day),
        "operations": operations(day),
        "operation_devices": operation_devices(day),
    }


def command_status(
    sid: str,
    request: str,
    device: str,
    state: str,
    created: str,
    updated: str,
    reason: str | None = None,
) -> dict:
    return {
        "id": sid,
        "request": request,
        "device": device,
        "state": state,
        "reason": reason,
        "created_at": created,
        "updated_at": updated,
    }


def command_requests(day: str) -> list[dict]:
    """req-done (4 devices), req-open (2 devices), req-none (a group, no devices)."""
    return [
        {
            "id": "req-done",
            "command_type": "DEVICE",
            "command": "REBOOT",
            "devices": ["d1", "d2", "d3", "d4"],
            "groups": [],
            "schedule": "IMMEDIATE",
            "created_at": day + "09:59:00Z",
        },
        {
            "id": "req-open",
            "command_type": "DEVICE",
            "command": "INSTALL",
            "devices": ["d1", "d2"],
            "groups": [],
            "created_at": day + "08:00:00Z",
        },
        {
            "id": "req-none",
            "command_type": "GROUP",
            "command": "LOCK",
            "devices": [],
            "groups": ["g-1"],
            "created_at": day + "07:00:00Z",
        },
    ]


def command_statuses(day: str) -> list[dict]:
    return [
        # 10, 30, 60, 120 minutes to a terminal state
        command_status(
            "s1", "req-done", "d1", "Command Success", day + "10:00:00Z", day + "10:10:00Z"
        ),
        command_status(
            "s2", "req-done", "d2", "Command Success", day + "10:00:00Z", day + "10:30:00Z"
        ),
        command_status(
            "s3",
            "req-done",
            "d3",
            "Command Failure",
            day + "10:00:00Z",
            day + "11:00:00Z",
            "Device busy",
        ),
        command_status(
            "s4", "req-done", "d4", "Command TimeOut", day + "10:00:00Z", day + "12:00:00Z", ""
        ),
        # d1 was requeued: its latest status (In Progress) counts, the older Queued does not
        command_status(
            "s5", "req-open", "d1", "Command Queued", day + "08:00:00Z", day + "09:00:00Z"
        ),
        command_status(
            "s6", "req-open", "d1", "Command In Progress", day + "09:00:00Z", day + "09:30:00Z"
        ),
        command_status(
            "s7", "req-open", "d2", "Command Queued", day + "08:00:00Z", day + "08:00:00Z"
        ),
    ]


def operations(day: str) -> list[dict]:
    return [
        {
            "id": "op-1",
            "operation": "INSTALL_APP",
            "state": "COMPLETED",
            "schedule_type": "IMMEDIATE",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "11:00:00Z",
            "operation_stats": {
                "device_operation_statuses_count": {
                    "success_device_count": 2,
                    "failed_device_count": 1,
                }
            },
        },
        {
            "id": "op-2",
            "operation": "CONVERGE",
            "state": "RESOLVING",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "10:00:00Z",
        },
    ]


def operation_devices(day: str) -> list[dict]:
    return [
        # 5, 15, 25 minutes to a terminal state; one still CREATED
        {
            "id": "od1",
            "operation_id": "op-1",
            "device_id": "d1",
            "state": "SUCCEDED",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "10:05:00Z",
        },
        {
            "id": "od2",
            "operation_id": "op-1",
            "device_id": "d2",
            "state": "SUCCEDED",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "10:15:00Z",
        },
        {
            "id": "od3",
            "operation_id": "op-1",
            "device_id": "d3",
            "state": "FAILED",
            "reason": "Install failed",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "10:25:00Z",
        },
        {
            "id": "od4",
            "operation_id": "op-1",
            "device_id": "d4",
            "state": "CREATED",
            "created_at": day + "10:00:00Z",
            "updated_at": day + "10:00:00Z",
        },
    ]
