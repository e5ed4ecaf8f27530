"""Installed-app records of a device: the legacy Android list and the v2 Apple/Windows list.

Apple devices also list store apps that are in no tenant catalogue (VPP, Esper's own app).
"""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import Record, WireBase


class DeviceAppRecords(WireBase):
    """Builders of the records of the apps installed on a device."""

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
