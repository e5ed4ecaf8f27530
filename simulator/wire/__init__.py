"""Wire records: the JSON objects the API serves, built on request from the compact fleet state.

Field names, types and enums follow ``esper-openapi-subset.json`` schema by schema. The same
functions feed the routes and ``Simulator.truth``, so the two can never disagree.

:class:`Wire` is the one builder the world holds (``world.wire``); its methods live in the
modules of this package, one per kind of record:

- ``base``: the fleet, the legacy links, shared helpers (:class:`~.base.WireBase`);
- ``devices``: the v2 device list item, its detail, the heartbeat;
- ``devices_legacy``: the legacy device record;
- ``catalogues``: groups, blueprints, tenant apps and Android applications;
- ``device_apps``: the apps installed on a device;
- ``activity``: commands, command statuses, operations, events;
- ``reports``: the status-metrics counters.
"""

from __future__ import annotations

from esper_warehouse.simulator.wire.activity import ActivityRecords
from esper_warehouse.simulator.wire.catalogues import CatalogueRecords
from esper_warehouse.simulator.wire.device_apps import DeviceAppRecords
from esper_warehouse.simulator.wire.devices import DeviceRecords
from esper_warehouse.simulator.wire.devices_legacy import LegacyDeviceRecords
from esper_warehouse.simulator.wire.reports import ReportRecords


class Wire(
    DeviceRecords,
    LegacyDeviceRecords,
    CatalogueRecords,
    DeviceAppRecords,
    ActivityRecords,
    ReportRecords,
):
    """Builds wire records for one fleet; ``link_base`` prefixes legacy URL links."""
