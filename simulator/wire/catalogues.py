"""Catalogue records: device groups, blueprints and their versions, the app catalogues.

Apps come in two catalogues: the v2 tenant apps (Apple and Windows: ``tenant_app``...) and the
Android applications of the legacy and v1 routes (``application``...).
"""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import App, derived_id
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import Record, WireBase, version_at


class CatalogueRecords(WireBase):
    """Builders of group, blueprint and app catalogue records."""

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
                ver = version_at(app, ts)
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
                "app_version_id": version_at(a, ts).id,
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
