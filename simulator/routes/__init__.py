"""The Esper API routes: one handler per path, each returning (status, JSON-able body).

Paths are relative to ``/api``; envelopes, parameter names and defaults follow the OpenAPI
subset path by path. Handlers run under the world lock (taken by the app).

``ROUTES`` below is the whole table; the handlers live in one module per API area:

- ``envelopes``: the list and success envelopes and id lookups every area uses;
- ``devices``: v2 and legacy devices, heartbeats, a device's event feed;
- ``groups`` and ``blueprints``: device groups and blueprints;
- ``apps``: tenant apps, the Android application catalogue, a device's installed apps;
- ``commands`` and ``operations``: commands with their statuses, operations with their parts;
- ``reports``: the status-metrics report and the Data Tap queries.

An area simulated whole in one module (its records, handler and truth, e.g. ``geofences``)
declares its own ``ROUTES`` lines there; they are appended to the table below, in module order.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator

from esper_warehouse.simulator.http import LEGACY, REPORTS, V2, Req
from esper_warehouse.simulator.routes.apps import (
    application_detail,
    application_detail_v1,
    application_version_detail,
    application_version_detail_v1,
    application_versions,
    application_versions_v1,
    applications,
    applications_v1,
    device_apps_by_version,
    device_apps_legacy,
    device_apps_v2,
    install_devices,
    tenant_app_detail,
    tenant_app_versions,
    tenant_apps,
)
from esper_warehouse.simulator.routes.blueprints import (
    blueprint_detail,
    blueprint_versions,
    blueprints_list,
)
from esper_warehouse.simulator.routes.commands import (
    command_detail,
    command_stats,
    commands_list,
    status_detail,
    statuses_list,
)
from esper_warehouse.simulator.routes.devices import (
    device_detail,
    devices_list,
    eventfeed,
    heartbeat,
    legacy_device_detail,
    legacy_devices,
)
from esper_warehouse.simulator.routes.envelopes import Body
from esper_warehouse.simulator.routes.groups import devicegroups, subgroups
from esper_warehouse.simulator.routes.operations import (
    operation_detail,
    operation_devices,
    operations_list,
)
from esper_warehouse.simulator.routes.reports import datatap_create, datatap_get, status_metrics
from esper_warehouse.simulator.state import World

Handler = Callable[[World, Req], tuple[int, Body]]

EID = "{eid}"
# (method, path template after /api, family, handler, needs enterprise id check)
ROUTES: tuple[tuple[str, str, str, Handler], ...] = (
    ("GET", "/v2/devices/", V2, devices_list),
    ("GET", "/v2/devices/{id}", V2, device_detail),
    ("GET", "/v2/heartbeat/", V2, heartbeat),
    ("GET", "/v2/subgroups", LEGACY, subgroups),
    ("GET", "/v2/blueprints/", V2, blueprints_list),
    ("GET", "/v2/blueprints/{id}/", V2, blueprint_detail),
    ("GET", "/v2/blueprints/{id}/versions/", V2, blueprint_versions),
    ("GET", "/v2/tenant-apps", V2, tenant_apps),
    ("GET", "/v2/tenant-apps/{id}", V2, tenant_app_detail),
    ("GET", "/v2/tenant-apps/{id}/versions", V2, tenant_app_versions),
    ("GET", "/v2/devices/{id}/device-apps/", V2, device_apps_v2),
    ("GET", "/v2/device-apps", V2, device_apps_by_version),
    ("GET", "/enterprise/{eid}/device/", LEGACY, legacy_devices),
    ("GET", "/enterprise/{eid}/device/{id}/", LEGACY, legacy_device_detail),
    ("GET", "/enterprise/{eid}/devicegroup/", LEGACY, devicegroups),
    ("GET", "/enterprise/{eid}/application/", LEGACY, applications),
    ("GET", "/enterprise/{eid}/application/{id}/", LEGACY, application_detail),
    ("GET", "/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions),
    (
        "GET",
        "/enterprise/{eid}/application/{id}/version/{vid}/",
        LEGACY,
        application_version_detail,
    ),
    ("GET", "/v1/enterprise/{eid}/application/", LEGACY, applications_v1),
    ("GET", "/v1/enterprise/{eid}/application/{id}/", LEGACY, application_detail_v1),
    ("GET", "/v1/enterprise/{eid}/application/{id}/version/", LEGACY, application_versions_v1),
    (
        "GET",
        "/v1/enterprise/{eid}/application/{id}/version/{vid}/",
        LEGACY,
        application_version_detail_v1,
    ),
    (
        "GET",
        "/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
        LEGACY,
        install_devices,
    ),
    (
        "GET",
        "/v1/enterprise/{eid}/application/{id}/version/{vid}/installdevices",
        LEGACY,
        install_devices,
    ),
    ("GET", "/enterprise/{eid}/device/{id}/app/", LEGACY, device_apps_legacy),
    ("GET", "/enterprise/{eid}/device/{id}/download/eventfeed/", LEGACY, eventfeed),
    ("GET", "/commands/v0/commands/", V2, commands_list),
    ("GET", "/commands/v0/commands/{id}/", V2, command_detail),
    ("GET", "/commands/v0/commands/{id}/stats/", V2, command_stats),
    ("GET", "/commands/v0/status/", V2, statuses_list),
    ("GET", "/commands/v0/status/{id}/", V2, status_detail),
    ("GET", "/v0/operations/", V2, operations_list),
    ("GET", "/v0/operations/{id}/", V2, operation_detail),
    ("GET", "/v0/operations/{id}/devices/", V2, operation_devices),
    ("GET", "/v2/enterprise/{eid}/report/status-metrics", V2, status_metrics),
    ("POST", "/data-tap/v0/queries", REPORTS, datatap_create),
    ("GET", "/data-tap/v0/queries/{id}", REPORTS, datatap_get),
)


def _area_routes() -> Iterator[tuple[str, str, str, Handler]]:
    """The `ROUTES` lines the area modules of this package declare themselves."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        yield from getattr(importlib.import_module(f"{__name__}.{module}"), "ROUTES", ())


ROUTES = (*ROUTES, *_area_routes())
