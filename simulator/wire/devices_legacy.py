"""The legacy device record: /enterprise/{eid}/device/ and its detail (live routes 11 and 14).

camelCase sub-objects (``hardwareInfo``, ``softwareInfo``, ``networkInfo``...), links instead
of ids, and Android build fields that other platforms leave null.
"""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import Record, WireBase, mac


class LegacyDeviceRecords(WireBase):
    """Builder of the legacy device record."""

    def device_legacy(self, i: int) -> Record:
        """The legacy /enterprise/{eid}/device/ record (live routes 11 and 14).

        camelCase sub-objects: ``softwareInfo.securityPatchLevel``, ``androidBuildNumber``,
        ``androidVersion``; ``hardwareInfo.serialNumber``; ``state`` and ``status`` ints;
        ``groups`` a list of group links (no ``group_id``); ``tags`` null; no ``last_seen``.
        Non-Android devices carry no Android build fields (null).
        """
        f = self.f
        return {
            **self._legacy_identity(i),
            "hardwareInfo": self._legacy_hardware_info(i),
            "softwareInfo": self._legacy_software_info(i),
            "provisioned_on": iso(f.provisioned[i]),
            "provisioned_with": "BLUEPRINT",
            "created_on": iso(f.created[i]),
            "updated_on": iso(f.updated[i]),
            **self._legacy_settings_and_telemetry(i),
        }

    def _legacy_identity(self, i: int) -> Record:
        """Id, links, names, state and blueprint of the legacy record."""
        f = self.f
        android = C.OS_PLATFORM[f.os[i]] == C.ANDROID
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
            "current_blueprint_id": f.blueprints[f.bp_current[i]].id,
            "current_blueprint_version_id": self.bp_version_id(f.bp_ver[i]),
            "current_blueprint_version_number": None,
            "blueprint_upgrade_status": C.UPGRADE_STATUSES[f.bp_status[i]],
        }

    def _legacy_hardware_info(self, i: int) -> Record:
        m = C.MODELS[self.f.model[i]]
        return {
            "brand": m.brand,
            "model": m.model,
            "manufacturer": m.manufacturer,
            "hardware": m.hardware,
            "serialNumber": self.f.serial[i],
            "deviceBasebandVersion": "unknown",
        }

    def _legacy_software_info(self, i: int) -> Record:
        """``softwareInfo``: the Android build fields are null on other platforms."""
        f = self.f
        os_ = f.os[i]
        osv, build = C.OS_VERSIONS[os_][f.osv[i]]
        android = C.OS_PLATFORM[os_] == C.ANDROID
        return {
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
        }

    def _legacy_settings_and_telemetry(self, i: int) -> Record:
        """The rest of the live legacy record (routes 11, 14), mostly settings and telemetry."""
        serial = self.f.serial[i]
        return {
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
            "fcm_id": derived_id("fcm", serial),
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
            "mqtt_id": derived_id("mqtt", serial),
            "networkInfo": {
                "ethernetMacAddress": None,
                "iccid1": "",
                "iccid2": None,
                "imei1": None,
                "imei2": None,
                "phoneNumber1": "",
                "phoneNumber2": None,
                "wifiMacAddress": mac(serial),
            },
            "suid": derived_id("suid", serial),
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
