"""Wire records: the JSON objects the API serves, built on request from the compact fleet state.

Field names, types and enums follow ``esper-openapi-subset.json`` schema by schema. The same
functions feed the routes and ``Simulator.truth``, so the two can never disagree.
"""

from __future__ import annotations

import functools
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import App, Fleet, derived_id
from esper_warehouse.simulator.timeutil import iso

Record = dict[str, Any]

# Status metrics (``Wire.status_metrics``): the simulator's definitions of the live counters.
_DAY, _TVOS = 86_400, C.OS_NAMES.index("tvOS")  # tvOS devices report no battery
LOW_BATTERY = 15  # percent
LAST_SEEN_PERIODS = (3_600, 86_400, 7 * 86_400)  # first, second, third period (seconds)
UNDER_PROVISIONING = frozenset({30, 40, 50, 80})
_METRIC_COUNTERS = (
    "high_risk", "low_battery", "low_risk", "medium_risk", "recently_added", "secure",
    "total_devices_under_risk", "under_provisioning", "unprovisioned_devices", "unspecified",
)  # fmt: skip

_OS_WIRE = ("Android", "iOS", "iPadOS", "tvOS", "Windows", "Linux")


class Wire:
    """Builds wire records for one fleet; ``link_base`` prefixes legacy URL links."""

    def __init__(self, fleet: Fleet, link_base: str) -> None:
        self.f = fleet
        self.link_base = link_base.rstrip("/")
        self.tag_ids = {t: derived_id("tag", fleet.seed, t) for t in C.TAGS}

    # -- links ---------------------------------------------------------------------------

    def enterprise_url(self) -> str:
        """Absolute URL of the enterprise (legacy link)."""
        return f"{self.link_base}/enterprise/{self.f.enterprise_id}/"

    def device_url(self, i: int) -> str:
        """Absolute legacy URL of device ``i``."""
        return f"{self.link_base}/enterprise/{self.f.enterprise_id}/device/{self.f.ids[i]}/"

    def group_url(self, g: int) -> str:
        """Absolute legacy URL of group ``g``."""
        return (
            f"{self.link_base}/enterprise/{self.f.enterprise_id}/devicegroup/{self.f.groups[g].id}/"
        )

    # -- devices -------------------------------------------------------------------------

    def device(self, i: int) -> Record:
        """The /v2/devices/ record of device ``i`` (shape depends on its platform)."""
        f = self.f
        os_ = f.os[i]
        plat = C.OS_PLATFORM[os_]
        m = C.MODELS[f.model[i]]
        osv, build = C.OS_VERSIONS[os_][f.osv[i]]
        agent_name, agent_code = C.AGENTS[plat][f.agent[i]]
        b_cur = f.bp_current[i]
        bp_info = {
            "assigned_blueprint_id": f.blueprints[f.bp_assigned[i]].id,
            "current_blueprint_id": f.blueprints[b_cur].id,
            "current_blueprint_version_id": self._bp_version_id(f.bp_ver[i]),
            "blueprint_upgrade_status": C.UPGRADE_STATUSES[f.bp_status[i]],
        }
        tags = [self.tag_ids[t] for t in f.tags[i]]
        serial = f.serial[i]
        rec: Record = {
            "id": f.ids[i],
            "name": f.name[i],
            "alias": f.alias[i],
            "os": _OS_WIRE[os_],
            "state": f.state[i],
            "platform": C.PLATFORMS[plat],
            "serial": serial,
            "os_version": osv,
            "tenant_id": f.tenant_id,
            "group_id": f.groups[f.group[i]].id if f.group[i] != C.NO_GROUP else None,
            "provisioned_on": iso(f.provisioned[i]),
            "tags": tags,
        }
        agent = {"version_code": agent_code, "version_name": agent_name}
        hw = {
            "brand": m.brand,
            "model": m.model,
            "serial": serial,
            "manufacturer": m.manufacturer,
            "hardware": m.hardware,
        }
        if plat == C.ANDROID:
            rec["hardware_info"] = hw
            # List items carry no patch level and no build number (live route 15); the detail
            # adds them (`device_detail`, live route 12).
            rec["software_info"] = {
                "os_version": osv,
                "esper_agent_info": agent,
                "foundation_info": None,
                "eea_version": "",
                "is_csdk_active": False,
                "is_knox_active": False,
                "is_supervisor_plugin_active": False,
            }
            if f.last_seen[i] >= 0:  # live: Android v2 list items carry last_seen too
                rec["last_seen"] = iso(f.last_seen[i])
            rec["network_info"] = {
                "imei1": f"35{int(serial[2:], 16) % 10**13:013d}",
                "wifi_mac_address": _mac(serial),
                "network_type": "WI-FI",
            }
            rec["memory_info"] = {
                "total_ram": "4096",
                "total_internal_storage": "65536",
                "internal_storage_binary_prefix": False,
                "units": "MB",
            }
            rec["blueprint_info"] = bp_info
            rec["battery_stats"] = {"battery_level": f.battery[i]}
            rec["is_gms"] = f.is_gms[i]
            rec["dpc_version"] = agent_name
            rec["eea_version"] = ""
            # The rest of the live Android item (route 15): telemetry objects, MQTT, drift.
            rec["active_plugins"] = ["esper-agent"]
            rec["app_mode_meta"] = {"is_kiosk": f.osv[i] % 2 == 0}
            rec["drift_state"] = 1 if f.bp_assigned[i] != f.bp_current[i] else 0
            rec["drift_severity"] = rec["drift_state"]
            rec["fcm_id"] = derived_id("fcm", serial)
            rec["global_device_id"] = derived_id("global", serial)
            rec["location_stats"] = {}
            rec["memory_stats"] = {}
            rec["mqtt_topic"] = f"devices/{f.ids[i]}"
            rec["network_stats"] = {
                "cellular_network_info": {},
                "current_active_connection": "WIFI",
                "ip_address": [],
                "wifi_network_info": {},
            }
            rec["security_state"] = None
            rec["policy"] = {}
            rec["managed_by"] = "BLUEPRINT"
            rec["provisioned_with"] = "BLUEPRINT"
            rec["template_name"] = None
            rec["is_seamless"] = False
            rec["is_esper_managed"] = True
        elif plat == C.APPLE:
            rec["hardware_info"] = hw
            rec["software_info"] = {
                "os_version": osv,
                "os_build_number": build,
                "esper_agent_info": agent,
            }
            rec["blueprint_info"] = bp_info
            rec["udid"] = f"{int(serial[2:], 16):08X}-{derived_id('udid', serial)[-12:].upper()}"
            rec["device_source"] = "ABM" if i % 3 else "NON_ABM"
            rec["is_supervised"] = True
            rec["managed_by"] = "BLUEPRINT"
            rec["provisioned_with"] = "BLUEPRINT"
            rec["is_seamless"] = False
            rec["is_locked_down"] = False
            if f.last_seen[i] >= 0:  # never-seen devices carry no last_seen (not nullable)
                rec["last_seen"] = iso(f.last_seen[i])
            if os_ != 3:
                rec["battery_stats"] = {"battery_level": f.battery[i]}
        else:
            rec["hardware_info"] = hw
            sw = {"os_build_number": build, "os_version": osv, "os": _OS_WIRE[os_]}
            if plat == C.LINUX:
                sw["os_distribution"] = "Ubuntu"
                sw["kernel_architecture"] = m.hardware
            sw["esper_agent_info"] = agent
            rec["software_info"] = sw
            rec["network_info"] = {"wifi_mac_address": _mac(serial)}
            rec["blueprint_info"] = bp_info
            rec["battery_stats"] = {"battery_level": f.battery[i]}
            if plat == C.LINUX:
                rec["managed_by"] = "BLUEPRINT"
            rec["provisioned_with"] = "BLUEPRINT"
            rec["is_seamless"] = False
            if f.last_seen[i] >= 0:
                rec["last_seen"] = iso(f.last_seen[i])
        rec["created_by"] = f.users[0]
        rec["updated_by"] = f.users[i % len(f.users)]
        rec["created_at"] = iso(f.created[i])
        rec["updated_at"] = iso(f.updated[i])
        return rec

    def device_detail(self, i: int) -> Record:
        """The /v2/devices/{id} record: the list item plus what only the detail carries.

        Live route 12: ``software_info`` of an Android device adds ``security_patch_level`` (the
        subset's ``security_path_level`` is a typo), ``os_build_number`` and a
        ``foundation_info`` whose version numbers are ints.
        """
        rec = self.device(i)
        f = self.f
        if C.OS_PLATFORM[f.os[i]] == C.ANDROID:
            _, build = C.OS_VERSIONS[f.os[i]][f.osv[i]]
            rec["hardware_info"] = {**rec["hardware_info"], "device_baseband_version": "unknown"}
            rec["network_info"] = {**rec["network_info"], "iccid1": ""}
            rec["network_stats"] = {
                **rec["network_stats"],
                "cellular_network_info": dict.fromkeys(_CELLULAR_KEYS),
            }
            rec["software_info"] = {
                **rec["software_info"],
                "bootloader_version": "unknown",
                "device_kernel_version": "5.10",
                "os_build_number": build,
                "security_patch_level": f.patch_levels[f.patch[i]],
                "foundation_info": {
                    "build_flavor": "user",
                    "build_number": 100 + f.osv[i],
                    "foundation_device_model_id": derived_id("model", f.model[i]),
                    "major_version": 1,
                    "minor_version": f.osv[i],
                    "project_name": "foundation",
                    "variant": "default",
                },
            }
        return rec

    def device_legacy(self, i: int) -> Record:
        """The legacy /enterprise/{eid}/device/ record (live routes 11 and 14).

        camelCase sub-objects: ``softwareInfo.securityPatchLevel``, ``androidBuildNumber``,
        ``androidVersion``; ``hardwareInfo.serialNumber``; ``state`` and ``status`` ints;
        ``groups`` a list of group links (no ``group_id``); ``tags`` null; no ``last_seen``.
        Non-Android devices carry no Android build fields (null).
        """
        f = self.f
        os_ = f.os[i]
        plat = C.OS_PLATFORM[os_]
        m = C.MODELS[f.model[i]]
        osv, build = C.OS_VERSIONS[os_][f.osv[i]]
        android = plat == C.ANDROID
        b_cur = f.bp_current[i]
        return {
            "id": f.ids[i],
            "url": self.device_url(i),
            "device_name": f.name[i],
            "alias_name": f.alias[i],
            "enterprise": self.enterprise_url(),
            "esper_client": "shoonyadpc" if android else "esper-apple",
            "state": f.state[i],
            "status": f.state[i],
            "groups": [self.group_url(f.group[i])] if f.group[i] != C.NO_GROUP else [],
            "tags": None,
            "api_level": 30 + f.osv[i] if android else 0,
            "device_type": "dpc" if android else "apple",
            "is_active": f.state[i] == C.STATE_ACTIVE,
            "is_gms": bool(f.is_gms[i]) if android else False,
            "assigned_blueprint_id": f.blueprints[f.bp_assigned[i]].id,
            "current_blueprint_id": f.blueprints[b_cur].id,
            "current_blueprint_version_id": self._bp_version_id(f.bp_ver[i]),
            "current_blueprint_version_number": None,
            "blueprint_upgrade_status": C.UPGRADE_STATUSES[f.bp_status[i]],
            "hardwareInfo": {
                "brand": m.brand,
                "model": m.model,
                "manufacturer": m.manufacturer,
                "hardware": m.hardware,
                "serialNumber": f.serial[i],
                "deviceBasebandVersion": "unknown",
            },
            "softwareInfo": {
                "androidVersion": osv if android else None,
                "androidBuildNumber": build if android else None,
                "securityPatchLevel": f.patch_levels[f.patch[i]] if android else None,
                "androidBuildTime": 1_700_000_000 + f.osv[i],
                "airwaveInfo": None,
                "bootloaderVersion": "unknown",
                "deviceKernelVersion": "5.10",
                "eeaVersion": "",
                "isCSDKActive": False,
                "isEdgeboxActive": False,
                "isKnoxActive": False,
                "isSupervisorPluginActive": False,
                "isZebraEMDKActive": False,
                "supportedAbi": "arm64-v8a",
                "foundationInfo": {
                    "buildNumber": 100 + f.osv[i],
                    "majorVersion": 1,
                    "minorVersion": f.osv[i],
                    "projectName": "foundation",
                    "variant": "default",
                    "buildFlavor": "user",
                    "esperOtaManagerVersionCode": 1,
                    "esperOtaManagerVersionName": "1.0",
                },
            },
            "provisioned_on": iso(f.provisioned[i]),
            "provisioned_with": "BLUEPRINT",
            "created_on": iso(f.created[i]),
            "updated_on": iso(f.updated[i]),
            # the rest of the live legacy record (routes 11, 14), mostly settings and telemetry
            "audioConstraints": None,
            "current_app_mode": 0,
            "displays": {
                "density": 2.0,
                "displayId": 0,
                "height": 1920,
                "name": "Built-in Screen",
                "refreshRate": 60,
                "width": 1080,
            },
            "dpcInfo": None,
            "emm_device": None,
            "fcm_id": derived_id("fcm", f.serial[i]),
            "has_seamlessInfo": False,
            "initialtemplate": "",
            "iot_mqtt_base_topic": "",
            "is_esper_managed": True,
            "lockdown_state": 0,
            "managed_by": "BLUEPRINT",
            "memoryInfo": {
                "internalStorageBinaryPrefix": False,
                "totalInternalStorage": "65536",
                "totalRam": "4096",
            },
            "mqtt_id": derived_id("mqtt", f.serial[i]),
            "networkInfo": {
                "ethernetMacAddress": None,
                "iccid1": "",
                "iccid2": None,
                "imei1": None,
                "imei2": None,
                "phoneNumber1": "",
                "phoneNumber2": None,
                "wifiMacAddress": _mac(f.serial[i]),
            },
            "suid": derived_id("suid", f.serial[i]),
            "timezone_string": "UTC",
            "use_iot_mqtt": False,
            "use_mqtt": True,
            "wifi_access_points": [],
            "policy": None,
            "policy_name": None,
            "user": None,
            "template_name": None,
            "current_command": None,
            "kiosk_app_name": None,
        }

    def heartbeat(self, i: int) -> Record:
        """The last-seen record of device ``i`` (status 1 for an active device)."""
        f = self.f
        return {
            "device_id": f.ids[i],
            "timestamp": iso(f.last_seen[i]),
            "status": 1 if f.state[i] == C.STATE_ACTIVE else 0,
        }

    # -- groups --------------------------------------------------------------------------

    def group(self, g: int, device_count: int) -> Record:
        """The legacy DeviceGroup record of group ``g``."""
        grp = self.f.groups[g]
        return {
            "id": grp.id,
            "name": grp.name,
            "created_on": iso(grp.created),
            "enterprise": self.enterprise_url(),
            "parent": self.group_url(grp.parent) if grp.parent >= 0 else None,
            "device_count": device_count,
            "path": grp.path,
            "children_count": len(grp.children),
            "blueprint": self.f.blueprints[grp.blueprint].id,
        }

    # -- blueprints ----------------------------------------------------------------------

    def _bp_version_id(self, g: int) -> str:
        b, v = self.f.bp_versions[g]
        return self.f.blueprints[b].versions[v].id

    def blueprint(self, b: int, v: int | None = None) -> Record:
        """Blueprint ``b`` at version index ``v`` (latest when None), BlueprintV2 shape.

        A blueprint record (``v`` None) carries the blueprint's creation time; a record of the
        versions list carries the time that version was created (published).
        """
        bp = self.f.blueprints[b]
        ver = bp.versions[-1 if v is None else v]
        return {
            "id": bp.id,
            "name": bp.name,
            "description": f"{bp.name} configuration",
            "comments": f"Version {ver.number}",
            "version_number": ver.number,
            "version_id": ver.id,
            "minor_version_number": 0,
            "publish": True,
            "settings": self._bp_settings(bp.os, ver.created),
            "created_by": self.f.users[0],
            "updated_by": self.f.users[1],
            "created_at": iso(bp.created if v is None else ver.created),
            "updated_at": iso(ver.updated),
        }

    def _bp_settings(self, os_: int, ts: int) -> Record:
        plat = C.OS_PLATFORM[os_]
        f = self.f
        if plat == C.ANDROID:
            apps = []
            for app in f.legacy_apps[3:6]:
                ver = _version_at(app, ts)
                apps.append(
                    {
                        "app_id": app.id,
                        "app_version_id": ver.id,
                        "package_name": app.package,
                        "installation_rule": "DURING PROVISIONING",
                        "state": "SHOW",
                        "type": "ENTERPRISE",
                        "auto_update_mode": "autoUpdateDefault",
                    }
                )
            return {"android": {"apps": apps, "device_mode_settings": {"device_mode": "KIOSK"}}}
        key = {C.APPLE: "ios" if os_ != 3 else "tvos", C.WINDOWS: "windows", C.LINUX: "linux"}[plat]
        if plat == C.LINUX:
            return {"linux": {"files": []}}
        app_type = "TENANT_IOS" if plat == C.APPLE else "TENANT_WINDOWS"
        apps = [
            {
                "app_id": a.id,
                "app_version_id": _version_at(a, ts).id,
                "state": "SHOW",
                "app_type": app_type,
            }
            for a in f.tenant_apps
            if a.platform == plat
        ][:2]
        return {key: {"apps": apps}}

    # -- apps ----------------------------------------------------------------------------

    def tenant_app(self, k: int) -> Record:
        """TenantAppResponse of tenant app ``k``."""
        a = self.f.tenant_apps[k]
        return {
            "id": a.id,
            "platform": C.PLATFORMS[a.platform],
            "tenant_id": self.f.tenant_id,
            "package_name": a.package,
            "created_at": iso(a.created),
            "created_by": self.f.users[0],
            "updated_at": iso(a.updated),
            "updated_by": self.f.users[0],
        }

    def tenant_app_version(self, k: int, v: int) -> Record:
        """TenantAppVersionResponse of version ``v`` of tenant app ``k``."""
        a = self.f.tenant_apps[k]
        ver = a.versions[v]
        return {
            "id": ver.id,
            "app_id": a.id,
            "app_type": a.kind,
            "tenant_id": self.f.tenant_id,
            "app_name": a.name,
            "app_icon_url": f"https://cdn.example/icons/{a.package}.png",
            "release_notes": f"{a.name} {ver.name}",
            "description": a.name,
            "file_size_in_kb": 20_000 + 731 * ver.number,
            "device_family": ["IPHONE", "IPAD"] if a.platform == C.APPLE else ["DESKTOP"],
            "version_name": ver.name,
            "build_number": ver.code,
            "version_code": ver.code,
            "min_sdk_version": "16.0" if a.platform == C.APPLE else "10.0.19041",
            "created_at": iso(ver.created),
            "updated_at": iso(ver.updated),
            "created_by": self.f.users[0],
            "updated_by": self.f.users[0],
        }

    def application(self, k: int) -> Record:
        """Legacy Application record of Android app ``k`` (with its versions)."""
        a = self.f.legacy_apps[k]
        return {
            "id": a.id,
            "versions": [self._application_version_short(a, v) for v in range(len(a.versions))],
            "application_name": a.name,
            "package_name": a.package,
            "developer": "Acme Corp" if a.kind == "ENTERPRISE" else None,
            "category": a.category,
            "content_rating": "3.0",
            "compatibility": None,
            "created_on": iso(a.created),
            "updated_on": iso(a.updated),
            "is_active": True,
            "is_hidden": False,
            "auto_update_app": a.kind == "PLAYSTORE",
            "enterprise": self.enterprise_url(),
        }

    def application_v1(self, k: int) -> Record:
        """The v1 catalogue item of Android app ``k`` (live route 2): ``latest_version``, no list."""
        a = self.f.legacy_apps[k]
        ver = a.versions[-1]
        return {
            "id": a.id,
            "application_name": a.name,
            "package_name": a.package,
            "enterprise": self.enterprise_url(),
            "is_hidden": False,
            "latest_version": {
                "id": ver.id,
                "version_code": ver.code,
                "build_number": ver.code,
                "hash_string": derived_id("hash", ver.id).replace("-", ""),
                "icon_url": f"https://cdn.example/icons/{a.package}.png",
                "min_sdk_version": "26",
                "release_name": None,
                "target_sdk_version": None,
            },
        }

    def application_version_v1(self, k: int, v: int) -> Record:
        """A v1 version record of Android app ``k`` (live route 6): ints for counts and sizes."""
        a = self.f.legacy_apps[k]
        ver = a.versions[v]
        return {
            "id": ver.id,
            "application": a.id,
            "enterprise": self.enterprise_url(),
            "version_code": ver.code,
            "build_number": ver.code,
            "min_sdk_version": "26",
            "release_name": None,
            "release_comments": None,
            "release_date": iso(ver.created),
            "created_on": iso(ver.created),
            "app_file": None,
            "app_icon": f"https://cdn.example/icons/{a.package}.png",
            "approval_status": "APPROVED",
            "installed_count": self.f.installed_count(k, v),
            "is_default": v == len(a.versions) - 1,
            "is_g_play": a.kind == "PLAYSTORE",
            "size_in_mb": 12 + ver.number,
        }

    def _application_version_short(self, a: App, v: int) -> Record:
        ver = a.versions[v]
        return {
            "id": ver.id,
            "version_code": ver.code,
            "build_number": ver.code,
            "hash_string": derived_id("hash", ver.id).replace("-", ""),
            "min_sdk_version": "26",
            "target_sdk_version": "33",
            "download_url": f"https://cdn.example/apk/{a.package}-{ver.code}.apk",
            "icon_url": f"https://cdn.example/icons/{a.package}.png",
            "release_name": ver.name,
            "release_comments": f"Release {ver.name}",
        }

    def application_version(self, k: int, v: int) -> Record:
        """Legacy AppVersion record of version ``v`` of Android app ``k``."""
        a = self.f.legacy_apps[k]
        ver = a.versions[v]
        return {
            "id": ver.id,
            "permissions": [],
            "app_file": f"https://cdn.example/apk/{a.package}-{ver.code}.apk",
            "app_icon": f"https://cdn.example/icons/{a.package}.png",
            "version_code": ver.code,
            "build_number": ver.code,
            "size_in_mb": 12.5 + ver.number,
            "hash_string": derived_id("hash", ver.id).replace("-", ""),
            "release_name": ver.name,
            "release_comments": f"Release {ver.name}",
            "release_track": "Production",
            "created_on": iso(ver.created),
            "updated_on": iso(ver.updated),
            "min_sdk_version": "26",
            "target_sdk_version": "33",
            "is_enabled": True,
            "is_default": v == len(a.versions) - 1,
            "enterprise": self.enterprise_url(),
            "application": f"{self.link_base}/enterprise/{self.f.enterprise_id}/application/{a.id}/",
            "approval_status": "APPROVED",
        }

    def device_app_legacy(self, i: int, entry: tuple[int, int, int, int]) -> Record:
        """Legacy DeviceApp record (Android) of one installed app of device ``i``."""
        k, v, created, updated = entry
        a = self.f.legacy_apps[k]
        ver = a.versions[v]
        did = self.f.ids[i]
        return {
            "id": derived_id(did, "app", k),
            "app_name": a.name,
            "state": "SHOW",
            "app_type": a.kind,
            "package_name": a.package,
            "whitelisted": a.kind != "PLAYSTORE",
            "is_data_clearable": True,
            "is_uninstallable": a.kind != "PRELOADED",
            "product_id": None,
            "version_code": ver.code,
            "version_name": ver.name,
            "created_on": iso(created),
            "updated_on": iso(updated),
            "is_active": True,
            "is_kiosk_app": False,
            "is_esper_controlled": a.kind != "PLAYSTORE",
            "device": did,
            "identityHash": None,  # live route 16: null in every sampled item
            "installer_package": None,
        }

    def device_app_v2(self, i: int, entry: tuple[int, int, int, int]) -> Record:
        """DeviceAppsResponse record (Apple/Windows) of one installed app of device ``i``."""
        k, v, created, updated = entry
        a = self.f.tenant_apps[k]
        did = self.f.ids[i]
        rec: Record = {
            "id": derived_id(did, "app", k),
            "device_id": did,
            "app_id": a.id,
            "app_type": a.kind,
            "app_version_id": a.versions[v].id,
            "base64_app_config": "",
            "created_at": iso(created),
            "updated_at": iso(updated),
            "tenant_id": self.f.tenant_id,
        }
        if a.platform == C.APPLE:  # what Esper's own tool reads of Apple apps (live §9)
            rec.update(self._apple_app(a.name, a.package, a.versions[v].name))
        return rec

    def device_store_apps(self, i: int) -> list[Record]:
        """Apple apps in no tenant app list (VPP, ESPER_IOS): `bundle_id`, `apple_app_version`.

        Derived from the device (no random draw): Esper's app at the agent version on every
        Apple device; the VPP app on every other iPhone/iPad, its version following the OS.
        """
        f = self.f
        if C.OS_PLATFORM[f.os[i]] != C.APPLE:
            return []
        did = f.ids[i]
        out = []
        for n, (name, bundle, kind, versions) in enumerate(C.APPLE_STORE_APPS):
            if kind == "ESPER_IOS":
                version = C.AGENTS[C.APPLE][f.agent[i]][0]
            elif f.os[i] != 3 and i % 2 == 0:  # not on Apple TV
                version = versions[min(f.osv[i], len(versions) - 1)]
            else:
                continue
            out.append(
                {
                    "id": derived_id(did, "store-app", n),
                    "device_id": did,
                    "app_id": None,
                    "app_type": kind,
                    "app_version_id": None,
                    "base64_app_config": "",
                    "created_at": iso(f.provisioned[i]),
                    "updated_at": iso(f.provisioned[i]),
                    "tenant_id": f.tenant_id,
                    **self._apple_app(name, bundle, version),
                }
            )
        return out

    @staticmethod
    def _apple_app(name: str, bundle: str, version: str) -> Record:
        return {
            "app_name": name,
            "bundle_id": bundle,
            "apple_app_version": version,
            "platform": "APPLE",
            "device_families": ["IPHONE", "IPAD"],
        }

    # -- commands and operations ---------------------------------------------------------

    def command(self, r: int) -> Record:
        """CommandRequest record of request ``r``."""
        f = self.f
        req = f.commands[r]
        name, args = C.COMMANDS[req.command]
        sched_args: Record = {}
        if req.schedule == "WINDOW":
            sched_args = {
                "name": f"window-{req.id[:8]}",
                "start_datetime": iso(req.created),
                "end_datetime": iso(req.created + 7 * 86_400),
                "time_type": "console",
                "window_start_time": "22:00",
                "window_end_time": "23:59",
                "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
            }
        # Live route 27: `groups`, `schedule_args`, `reason` and `alias` are null when unset.
        return {
            "id": req.id,
            "command_type": "GROUP" if req.group >= 0 else "DEVICE",
            "devices": [] if req.group >= 0 else [f.ids[d] for d in req.devices],
            "groups": [f.groups[req.group].id] if req.group >= 0 else None,
            "device_type": "all",
            "command": name,
            "command_args": dict(args),
            "schedule": req.schedule,
            "schedule_args": sched_args or None,
            "reason": None,
            "alias": None,
            "created_by": req.created_by,
            "created_at": iso(req.created),
        }

    def command_status(self, s: int) -> Record:
        """CommandStatus record of status ``s``."""
        f = self.f
        st = f.statuses[s]
        return {
            "id": st.id,
            "request": f.commands[st.request].id,
            "device": f.ids[st.device],
            "state": C.COMMAND_STATES[st.state],
            "reason": st.reason or None,  # live route 29: null when there is none
            "created_at": iso(st.created),
            "updated_at": iso(st.updated),
        }

    def operation(self, o: int) -> Record:
        """OperationWithStats record of operation ``o``."""
        f = self.f
        op = f.operations[o]
        counts = [0, 0, 0, 0]
        for p in op.parts:
            counts[f.op_devices[p].state] += 1
        resolved = len(op.parts) if op.state >= C.OP_RESOLVED else 0
        dispatched = counts[1] + counts[2] + counts[3]
        return {
            "id": op.id,
            "operation": "CONVERGE",
            "state": C.OPERATION_STATES[op.state],
            "schedule_type": "IMMEDIATE",
            "schedule_args": {},
            "operation_device_query": {"device_ids": ",".join(f.ids[d] for d in op.devices)},
            "arguments": {"converge_with_provision": False},
            "alias": op.alias,
            "reason": "",
            "created_at": iso(op.created),
            "created_by": op.created_by,
            "updated_at": iso(op.updated),
            "updated_by": op.created_by,
            "operation_activity": [
                {"operation_state": name, "created_at": iso(ts)} for name, ts in op.activity
            ],
            "operation_stats": {
                "device_operation_statuses_count": {
                    "resolved_device_count": resolved,
                    "dispatched_device_count": dispatched,
                    "dispatch_failed_count": 0,
                    "failed_device_count": counts[3],
                    "success_device_count": counts[2],
                }
            },
        }

    def operation_device(self, p: int) -> Record:
        """DeviceOperationWithStats record of operation part ``p``."""
        f = self.f
        od = f.op_devices[p]
        return {
            "id": od.id,
            "operation_id": f.operations[od.operation].id,
            "device_id": f.ids[od.device],
            "state": C.OP_DEVICE_STATES[od.state],
            "reason": od.reason,
            "created_at": iso(od.created),
            "updated_at": iso(od.updated),
            "device_operation_activity": [
                {"device_operation_state": name, "created_at": iso(ts)} for name, ts in od.activity
            ],
        }

    # -- events --------------------------------------------------------------------------

    def event(self, i: int, ev: tuple[int, int, int, int, int]) -> Record:
        """EventFeed record of one event of device ``i``."""
        eid, ts, kind, a, b = ev
        return {
            "id": eid,
            "message_id": derived_id("msg", self.f.seed, eid),
            "device_status_id": derived_id("dst", self.f.seed, eid),
            "created_on": iso(ts),
            "message": self.event_message(i, kind, a, b),
            "device": self.device_url(i),
            "enterprise": self.enterprise_url(),
        }

    def event_message(self, i: int, kind: int, a: int, b: int) -> str:
        """Human-readable text of an event."""
        f = self.f
        if kind == C.EV_ENROLLED:
            return "Device enrolled"
        if kind in (C.EV_OS_UPDATED, C.EV_OS_FAILED):
            ver = C.OS_VERSIONS[f.os[i]][a][0]
            ok = kind == C.EV_OS_UPDATED
            return f"OS update to {ver} {'installed' if ok else 'failed'}"
        if kind in (C.EV_APP_INSTALLED, C.EV_APP_UPDATED, C.EV_APP_REMOVED, C.EV_APP_FAILED):
            cat = f.legacy_apps if f.platform(i) == C.ANDROID else f.tenant_apps
            app = cat[a]
            verb = {
                C.EV_APP_INSTALLED: "installed",
                C.EV_APP_UPDATED: "updated to",
                C.EV_APP_REMOVED: "removed",
                C.EV_APP_FAILED: "failed to update to",
            }[kind]
            ver = "" if kind == C.EV_APP_REMOVED else f" {app.versions[b].name}"
            return f"App {app.package} {verb}{ver}".replace("  ", " ")
        if kind == C.EV_COMMAND:
            return f"Command {C.COMMANDS[a][0]}: {C.COMMAND_STATES[b]}"
        if kind == C.EV_OPERATION:
            return f"Operation CONVERGE: device {C.OP_DEVICE_STATES[b]}"
        if kind == C.EV_BLUEPRINT:
            return f"Blueprint upgrade: {C.UPGRADE_STATUSES[b]}"
        if kind == C.EV_STATE:
            return f"Device state changed to {a}"
        return "Device settings changed"

    # -- reports -------------------------------------------------------------------------

    def status_metrics(self) -> Record:
        """GET /v2/enterprise/{eid}/report/status-metrics: a bare object of fleet counters.

        Live route 23 gives the shape (ints, plus ``last_seen`` with three periods), not the
        definitions; the simulator's, over the devices the API serves (not removed), are:
        ``recently_added`` provisioned in the last 7 days; ``low_battery`` battery below 15 %
        (of the devices that report a battery: not tvOS); ``last_seen`` periods: seen within the
        last hour, 24 hours, 7 days (each includes the shorter ones); ``under_provisioning``
        states 30, 40, 50 and 80; ``unprovisioned_devices`` never seen since enrolment; risk by
        Android patch age (months behind the newest patch level): ``secure`` 0-1, ``low_risk``
        2-3, ``medium_risk`` 4-5, ``high_risk`` 6 or more, ``total_devices_under_risk`` the
        three risks, ``unspecified`` devices without a patch level (not Android).
        """
        f, now = self.f, self.f.now
        newest = len(f.patch_levels) - 1
        n: Record = dict.fromkeys(_METRIC_COUNTERS, 0)
        periods = [0, 0, 0]
        for i in f.live():
            if now - 7 * _DAY <= f.provisioned[i] <= now:
                n["recently_added"] += 1
            if f.os[i] != _TVOS and f.battery[i] < LOW_BATTERY:
                n["low_battery"] += 1
            seen = f.last_seen[i]
            if seen < 0:
                n["unprovisioned_devices"] += 1
            else:
                for k, window in enumerate(LAST_SEEN_PERIODS):
                    periods[k] += now - window <= seen
            if f.state[i] in UNDER_PROVISIONING:
                n["under_provisioning"] += 1
            if f.patch[i] < 0:
                n["unspecified"] += 1
                continue
            behind = newest - f.patch[i]
            risk = "secure" if behind < 2 else "low_risk" if behind < 4 else "medium_risk"
            n["high_risk" if behind >= 6 else risk] += 1
        n["total_devices_under_risk"] = n["low_risk"] + n["medium_risk"] + n["high_risk"]
        names = ("first_period", "second_period", "third_period")
        n["last_seen"] = dict(zip(names, periods, strict=True))
        return n


# Live route 12: a device without a SIM reports every cellular field null.
_CELLULAR_KEYS = (
    "mobileIPv4",
    "mobileIPv6",
    "mobileNetworkStatus",
    "networkOperator",
    "networkType",
    "numberOfSim",
    "signalStrength",
    "simOperator",
)


@functools.lru_cache(maxsize=200_000)
def _mac(serial: str) -> str:
    h = derived_id("mac", serial).replace("-", "")[:12]
    return ":".join(h[k : k + 2] for k in range(0, 12, 2))


def _version_at(app: App, ts: int) -> Any:
    """The newest version of ``app`` published at or before ``ts`` (else the first)."""
    best = app.versions[0]
    for ver in app.versions:
        if ver.created <= ts:
            best = ver
    return best
