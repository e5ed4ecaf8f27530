"""Static catalogues the generated fleet indexes into: platforms, models, OS and agent versions.

Devices hold small integers pointing into these tuples, so a 100,000-device fleet stays compact.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

ANDROID, APPLE, WINDOWS, LINUX = 0, 1, 2, 3
PLATFORMS = ("ANDROID", "APPLE", "WINDOWS", "LINUX")

# (os name, platform, share of the fleet)
OSES: tuple[tuple[str, int, float], ...] = (
    ("Android", ANDROID, 0.70),
    ("iOS", APPLE, 0.08),
    ("iPadOS", APPLE, 0.06),
    ("tvOS", APPLE, 0.02),
    ("Windows", WINDOWS, 0.09),
    ("Linux", LINUX, 0.05),
)
OS_NAMES = tuple(o[0] for o in OSES)
OS_PLATFORM = tuple(o[1] for o in OSES)

# Versions per OS, oldest first: (os_version, os_build_number). Updates move a device up this list.
OS_VERSIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("10", "QP1A.190711.020"),
        ("11", "RP1A.200720.012"),
        ("12", "SP1A.210812.016"),
        ("13", "TP1A.220624.014"),
        ("13", "TQ3A.230901.001"),
        ("14", "UP1A.231005.007"),
        ("14", "UQ1A.240205.004"),
    ),
    (("16.7.8", "20H343"), ("17.5.1", "21F90"), ("17.6.1", "21G93"), ("18.0.1", "22A3370")),
    (("16.7.8", "20H343"), ("17.5.1", "21F90"), ("17.6.1", "21G93"), ("18.0.1", "22A3370")),
    (("17.5", "21L569"), ("17.6", "21M71"), ("18.0", "22J357")),
    (("10.0.19045", "19045.4529"), ("10.0.22631", "22631.3880"), ("10.0.26100", "26100.1742")),
    (("22.04", "5.15.0-112"), ("24.04", "6.8.0-41")),
)

# Android security patch levels (software_info.security_patch_level on the detail and legacy routes), oldest first: the 5th of each
# of the ten months before the simulated start, so their age is realistic whatever the start date.
N_PATCH_LEVELS = 10


def patch_levels(t0: int) -> tuple[str, ...]:
    """Monthly patch levels, the newest being the last 5th of a month before ``t0`` (epoch seconds)."""
    start = datetime.fromtimestamp(t0, UTC)
    year, month = start.year, start.month
    if start.day <= 5:  # this month's patch is not out yet
        year, month = (year - 1, 12) if month == 1 else (year, month - 1)
    levels = []
    for _ in range(N_PATCH_LEVELS):
        levels.append(f"{year:04d}-{month:02d}-05")
        year, month = (year - 1, 12) if month == 1 else (year, month - 1)
    return tuple(reversed(levels))


# Esper agent versions per platform, oldest first: (version_name, version_code).
AGENTS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("7.2.4", "70204"), ("7.3.1", "70301"), ("7.4.0", "70400"), ("7.5.2", "70502")),
    (("2.8.0", "280"), ("2.9.1", "291")),
    (("1.14.0", "11400"), ("1.15.3", "11503"), ("1.16.0", "11600")),
    (("0.9.2", "902"), ("1.0.1", "1001")),
)


class Model(NamedTuple):
    """A hardware model; `os` indexes OSES."""

    os: int
    brand: str
    manufacturer: str
    model: str
    hardware: str


MODELS: tuple[Model, ...] = (
    Model(0, "samsung", "samsung", "SM-X200", "qcom"),
    Model(0, "samsung", "samsung", "SM-G715FN", "exynos9611"),
    Model(0, "Zebra", "Zebra Technologies", "TC52", "qcom"),
    Model(0, "Zebra", "Zebra Technologies", "TC57", "qcom"),
    Model(0, "Lenovo", "LENOVO", "TB-X606F", "mt6762"),
    Model(0, "google", "Google", "Pixel 7", "gs201"),
    Model(0, "Elo", "Elo Touch Solutions", "I-Series 4", "qcom"),
    Model(0, "Honeywell", "Honeywell", "CT40", "qcom"),
    Model(1, "Apple", "Apple Inc.", "iPhone 13", "iPhone14,5"),
    Model(1, "Apple", "Apple Inc.", "iPhone 15", "iPhone15,4"),
    Model(2, "Apple", "Apple Inc.", "iPad (9th generation)", "iPad12,1"),
    Model(2, "Apple", "Apple Inc.", "iPad Air (5th generation)", "iPad13,16"),
    Model(3, "Apple", "Apple Inc.", "Apple TV 4K", "AppleTV14,1"),
    Model(4, "Microsoft", "Microsoft Corporation", "Surface Go 3", "x64"),
    Model(4, "Dell", "Dell Inc.", "OptiPlex 7010", "x64"),
    Model(4, "HP", "HP", "Engage One Pro", "x64"),
    Model(5, "Raspberry Pi", "Raspberry Pi Ltd", "Raspberry Pi 4 Model B", "aarch64"),
    Model(5, "Intel", "Intel Corporation", "NUC11TNHi5", "x86_64"),
)
MODELS_BY_OS: tuple[tuple[int, ...], ...] = tuple(
    tuple(i for i, m in enumerate(MODELS) if m.os == o) for o in range(len(OSES))
)

TAGS = ("kiosk", "warehouse", "retail", "pilot", "loaner", "vip", "outdoor", "night-shift")

# Device states (integers as served; DeviceStateEnum of the spec). Apple, Windows and Linux
# only know a subset (0, 1, 20, 70, 80, 90, 100, 200): 60 (offline) is Android's.
STATE_ACTIVE, STATE_DISABLED, STATE_OFFLINE = 1, 20, 60
STATE_WIPE, STATE_ONBOARDING, STATE_ONBOARDING_FAILED = 70, 80, 90
STATE_ONBOARDED, STATE_REGISTERED = 100, 200
STATE_APPLYING_BLUEPRINT = 150  # one of the 110-190 blueprint steps (live §22)
STATES_PROVISIONING = (30, 40, 50)  # Android only: provisioning begun, Google Play, policies

# Devices in no group (live routes 11, 12, 14, 15: an Android device with `group_id` null on v2,
# `groups: []` on the legacy routes; route 9: `group_name` null): about 1 Android device in 64,
# picked by its id (no random draw), group index NO_GROUP.
NO_GROUP = -1
UNGROUPED_ONE_IN = 64

UPGRADE_STATUSES = (
    "UPGRADED",
    "UPGRADABLE",
    "UPGRADE_INITIATED",
    "UPGRADE_FAILED",
    "NOT_UPGRADABLE",
    "NOT_APPLICABLE",
)
UPGRADED, UPGRADABLE, UPGRADE_INITIATED, UPGRADE_FAILED, NOT_UPGRADABLE, NOT_APPLICABLE = range(6)

# Legacy (Android) applications: (application_name, package_name, category, app_type, n_versions)
ANDROID_APPS: tuple[tuple[str, str, str, str, int], ...] = (
    ("Esper Agent", "io.shoonya.shoonyadpc", "Tools", "PRELOADED", 4),
    ("Chrome", "com.android.chrome", "Communication", "PLAYSTORE", 5),
    ("Google Play services", "com.google.android.gms", "Tools", "PRELOADED", 4),
    ("ScanPro", "com.acme.scanpro", "Business", "ENTERPRISE", 6),
    ("Inventory Hub", "com.acme.inventory", "Business", "ENTERPRISE", 5),
    ("POS Lite", "com.acme.poslite", "Business", "ENTERPRISE", 4),
    ("Courier", "com.acme.courier", "Productivity", "ENTERPRISE", 5),
    ("Kiosk Browser", "com.acme.kioskbrowser", "Tools", "ENTERPRISE", 3),
    ("Teams", "com.microsoft.teams", "Productivity", "PLAYSTORE", 4),
    ("Signage Player", "com.acme.signage", "Media", "ENTERPRISE", 3),
    ("Time Clock", "com.acme.timeclock", "Business", "ENTERPRISE", 3),
    ("Remote Viewer", "io.esper.remoteviewer", "Tools", "PRELOADED", 3),
)
ANDROID_BASE_APPS = (0, 1, 2)  # installed on every Android device
# Apps the legacy application routes do not know (live §11: the legacy list counted 424 apps,
# v1 752; legacy item routes answered 404 for ids v1 served): here, the Play Store apps added
# through managed Google Play. The v1 routes and installdevices serve every app.
LEGACY_UNLISTED_KINDS = frozenset({"PLAYSTORE"})

# Apple apps that are in no tenant app list (live §9-10): an App Store (VPP) app on every other
# iPhone/iPad, in one of its versions, and Esper's own iOS app (ESPER_IOS) on every Apple device,
# at the device's agent version. (app_name, bundle_id, app_type, versions)
APPLE_STORE_APPS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("Esper", "io.esper.ios.agent", "ESPER_IOS", ()),
    (
        "Microsoft Outlook",
        "com.microsoft.Office.Outlook",
        "VPP",
        ("4.2401.0", "4.2402.1", "4.2403.0"),
    ),
)

# Tenant apps (Apple/Windows): (app_name, package_name, platform, n_versions)
TENANT_APPS: tuple[tuple[str, str, int, int], ...] = (
    ("Store Companion", "com.acme.storecompanion", APPLE, 5),
    ("Field Notes", "com.acme.fieldnotes", APPLE, 4),
    ("Menu Board", "com.acme.menuboard", APPLE, 3),
    ("Clienteling", "com.acme.clienteling", APPLE, 4),
    ("POS Terminal", "Acme.PosTerminal", WINDOWS, 4),
    ("Kiosk Shell", "Acme.KioskShell", WINDOWS, 3),
    ("Label Printer", "Acme.LabelPrinter", WINDOWS, 3),
)

# Blueprints: (name, os index, n_versions at start)
BLUEPRINTS: tuple[tuple[str, int, int], ...] = (
    ("Warehouse Scanners", 0, 5),
    ("Retail Kiosk", 0, 4),
    ("Field Tablets", 0, 3),
    ("Store iPhones", 1, 4),
    ("Store iPads", 2, 3),
    ("Lobby TV", 3, 2),
    ("POS Terminals", 4, 3),
    ("Edge Gateways", 5, 2),
)

COMMAND_STATES = (
    "Command Scheduled",
    "Command Queued",
    "Command Initiated",
    "Command Acknowledged",
    "Command In Progress",
    "Command Success",
    "Command Failure",
    "Command TimeOut",
    "Command Cancelled",
)
(
    CMD_SCHEDULED,
    CMD_QUEUED,
    CMD_INITIATED,
    CMD_ACKNOWLEDGED,
    CMD_IN_PROGRESS,
    CMD_SUCCESS,
    CMD_FAILURE,
    CMD_TIMEOUT,
    CMD_CANCELLED,
) = range(9)
CMD_TERMINAL = frozenset({CMD_SUCCESS, CMD_FAILURE, CMD_TIMEOUT, CMD_CANCELLED})
# Legal forward transitions of a command status.
CMD_TRANSITIONS: dict[int, frozenset[int]] = {
    CMD_SCHEDULED: frozenset({CMD_QUEUED, CMD_CANCELLED}),
    CMD_QUEUED: frozenset({CMD_INITIATED, CMD_TIMEOUT, CMD_CANCELLED}),
    CMD_INITIATED: frozenset({CMD_ACKNOWLEDGED, CMD_TIMEOUT}),
    CMD_ACKNOWLEDGED: frozenset({CMD_IN_PROGRESS, CMD_TIMEOUT, CMD_FAILURE}),
    CMD_IN_PROGRESS: frozenset({CMD_SUCCESS, CMD_FAILURE, CMD_TIMEOUT}),
}

# (command, command_args template, share)
COMMANDS: tuple[tuple[str, dict[str, object]], ...] = (
    ("REBOOT", {}),
    ("UPDATE_HEARTBEAT", {}),
    ("LOCK", {}),
    ("SET_NEW_POLICY", {"policy_url": "https://policies.example/p/7"}),
    ("CLEAR_APP_DATA", {"package_name": "com.acme.scanpro"}),
    ("BEEP_DEVICE", {}),
    ("SET_WIFI_STATE", {"wifi_state": True}),
    ("NOTIFY_DEVICE", {"title": "Maintenance", "message": "Please dock the device tonight"}),
    ("INSTALL", {"package_name": "com.acme.inventory", "app_version": "latest"}),
    ("SET_TIMEZONE", {"timezone_string": 0}),
)

# Operations: service states and their integer filter values (service-interface.md).
OPERATION_STATES = ("CREATED", "RESOLVING", "RESOLVED", "DISPATCHING", "COMPLETED", "FAILED")
OP_CREATED, OP_RESOLVING, OP_RESOLVED, OP_DISPATCHING, OP_COMPLETED, OP_FAILED = range(6)
OPERATION_STATE_INT = {0: 10, 1: 20, 2: 30, 3: 40, 4: 70, 5: 90}
# operation_activity names (OperationActivity enum) for each state reached
OPERATION_ACTIVITY = {
    OP_CREATED: ("CREATED",),
    OP_RESOLVING: ("QUERY INITIATED",),
    OP_RESOLVED: ("QUERY RESOLVED",),
    OP_DISPATCHING: ("DISPATCHING", "DISPATCHED"),
    OP_COMPLETED: ("PROCESSING", "SUCCESS"),
    OP_FAILED: ("PROCESSING", "FAILURE"),
}
OP_DEVICE_STATES = ("CREATED", "INITIATED", "SUCCEDED", "FAILED")
OPD_CREATED, OPD_INITIATED, OPD_SUCCEEDED, OPD_FAILED = range(4)
OP_DEVICE_STATE_INT = {0: 10, 1: 20, 2: 50, 3: 60}

# Event feed kinds (message templates take the record's two detail integers).
EV_ENROLLED, EV_CHANGED, EV_OS_UPDATED, EV_OS_FAILED = 0, 1, 2, 3
EV_APP_INSTALLED, EV_APP_UPDATED, EV_APP_REMOVED, EV_APP_FAILED = 4, 5, 6, 7
EV_COMMAND, EV_OPERATION, EV_BLUEPRINT, EV_STATE = 8, 9, 10, 11
