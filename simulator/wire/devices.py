"""Device records of the v2 API: the /v2/devices/ list item, its detail and the heartbeat.

The list item's shape depends on the platform (Android, Apple, Windows/Linux): the fields all
platforms share come first, then the platform's own, then the audit fields, in the order the
live API sends them.
"""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.drift import esper_drift
from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.security import esper_security_state
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import OS_WIRE, Record, WireBase, mac

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


class DeviceRecords(WireBase):
    """Builders of the v2 device records."""

    def device(self, i: int) -> Record:
        """The /v2/devices/ record of device ``i`` (shape depends on its platform)."""
        plat = C.OS_PLATFORM[self.f.os[i]]
        rec = self._device_common(i)
        if plat == C.ANDROID:
            self._add_android_fields(rec, i)
        elif plat == C.APPLE:
            self._add_apple_fields(rec, i)
        else:
            self._add_desktop_fields(rec, i, plat)
        f = self.f
        rec["created_by"] = f.users[0]
        rec["updated_by"] = f.users[i % len(f.users)]
        rec["created_at"] = iso(f.created[i])
        rec["updated_at"] = iso(f.updated[i])
        return rec

    def _device_common(self, i: int) -> Record:
        """The fields every platform's list item starts with."""
        f = self.f
        os_ = f.os[i]
        return {
            "id": f.ids[i],
            "name": f.name[i],
            "alias": f.alias[i],
            "os": OS_WIRE[os_],
            "state": f.state[i],
            "platform": C.PLATFORMS[C.OS_PLATFORM[os_]],
            "serial": f.serial[i],
            "os_version": C.OS_VERSIONS[os_][f.osv[i]][0],
            "tenant_id": f.tenant_id,
            "group_id": f.groups[f.group[i]].id if f.group[i] != C.NO_GROUP else None,
            "provisioned_on": iso(f.provisioned[i]),
            "tags": [self.tag_ids[t] for t in f.tags[i]],
        }

    def _hardware_info(self, i: int) -> Record:
        m = C.MODELS[self.f.model[i]]
        return {
            "brand": m.brand,
            "model": m.model,
            "serial": self.f.serial[i],
            "manufacturer": m.manufacturer,
            "hardware": m.hardware,
        }

    def _agent_info(self, i: int) -> Record:
        f = self.f
        agent_name, agent_code = C.AGENTS[C.OS_PLATFORM[f.os[i]]][f.agent[i]]
        return {"version_code": agent_code, "version_name": agent_name}

    def _blueprint_info(self, i: int) -> Record:
        f = self.f
        return {
            "assigned_blueprint_id": f.blueprints[f.bp_assigned[i]].id,
            "current_blueprint_id": f.blueprints[f.bp_current[i]].id,
            "current_blueprint_version_id": self.bp_version_id(f.bp_ver[i]),
            "blueprint_upgrade_status": C.UPGRADE_STATUSES[f.bp_status[i]],
        }

    def _add_android_fields(self, rec: Record, i: int) -> None:
        f = self.f
        serial = f.serial[i]
        agent = self._agent_info(i)
        rec["hardware_info"] = self._hardware_info(i)
        # List items carry no patch level and no build number (live route 15); the detail
        # adds them (`device_detail`, live route 12).
        rec["software_info"] = {
            "os_version": rec["os_version"],
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
            "wifi_mac_address": mac(serial),
            "network_type": "WI-FI",
        }
        rec["memory_info"] = {
            "total_ram": "4096",
            "total_internal_storage": "65536",
            "internal_storage_binary_prefix": False,
            "units": "MB",
        }
        rec["blueprint_info"] = self._blueprint_info(i)
        rec["battery_stats"] = {"battery_level": f.battery[i]}
        rec["is_gms"] = f.is_gms[i]
        rec["dpc_version"] = agent["version_name"]
        rec["eea_version"] = ""
        self._add_android_telemetry(rec, i)

    def _add_android_telemetry(self, rec: Record, i: int) -> None:
        """The rest of the live Android item (route 15): telemetry objects, MQTT, drift."""
        f = self.f
        serial = f.serial[i]
        rec["active_plugins"] = ["esper-agent"]
        rec["app_mode_meta"] = {"is_kiosk": f.osv[i] % 2 == 0}
        rec["drift_state"], rec["drift_severity"] = esper_drift(f, i)
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
        rec["security_state"] = esper_security_state(f, i)
        rec["policy"] = {}
        rec["managed_by"] = "BLUEPRINT"
        rec["provisioned_with"] = "BLUEPRINT"
        rec["template_name"] = None
        rec["is_seamless"] = False
        rec["is_esper_managed"] = True

    def _add_apple_fields(self, rec: Record, i: int) -> None:
        f = self.f
        serial = f.serial[i]
        rec["hardware_info"] = self._hardware_info(i)
        rec["software_info"] = {
            "os_version": rec["os_version"],
            "os_build_number": C.OS_VERSIONS[f.os[i]][f.osv[i]][1],
            "esper_agent_info": self._agent_info(i),
        }
        rec["blueprint_info"] = self._blueprint_info(i)
        rec["udid"] = f"{int(serial[2:], 16):08X}-{derived_id('udid', serial)[-12:].upper()}"
        rec["device_source"] = "ABM" if i % 3 else "NON_ABM"
        rec["is_supervised"] = True
        rec["managed_by"] = "BLUEPRINT"
        rec["provisioned_with"] = "BLUEPRINT"
        rec["is_seamless"] = False
        rec["is_locked_down"] = False
        if f.last_seen[i] >= 0:  # never-seen devices carry no last_seen (not nullable)
            rec["last_seen"] = iso(f.last_seen[i])
        if f.os[i] != 3:
            rec["battery_stats"] = {"battery_level": f.battery[i]}

    def _add_desktop_fields(self, rec: Record, i: int, plat: int) -> None:
        """Windows and Linux."""
        f = self.f
        os_ = f.os[i]
        osv, build = C.OS_VERSIONS[os_][f.osv[i]]
        rec["hardware_info"] = self._hardware_info(i)
        sw = {"os_build_number": build, "os_version": osv, "os": OS_WIRE[os_]}
        if plat == C.LINUX:
            sw["os_distribution"] = "Ubuntu"
            sw["kernel_architecture"] = C.MODELS[f.model[i]].hardware
        sw["esper_agent_info"] = self._agent_info(i)
        rec["software_info"] = sw
        rec["network_info"] = {"wifi_mac_address": mac(f.serial[i])}
        rec["blueprint_info"] = self._blueprint_info(i)
        rec["battery_stats"] = {"battery_level": f.battery[i]}
        if plat == C.LINUX:
            rec["managed_by"] = "BLUEPRINT"
        rec["provisioned_with"] = "BLUEPRINT"
        rec["is_seamless"] = False
        if f.last_seen[i] >= 0:
            rec["last_seen"] = iso(f.last_seen[i])

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

    def heartbeat(self, i: int) -> Record:
        """The last-seen record of device ``i`` (status 1 for an active device)."""
        f = self.f
        return {
            "device_id": f.ids[i],
            "timestamp": iso(f.last_seen[i]),
            "status": 1 if f.state[i] == C.STATE_ACTIVE else 0,
        }
