"""The simulated tenant as the routes see it: the fleet, its wire builder, a lock, indexes, truth."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.datatap import DataTap
from esper_warehouse.simulator.dynamics import Engine
from esper_warehouse.simulator.dynamics.rates import HISTORY_DAYS
from esper_warehouse.simulator.fleet import DAY, Fleet, derived_id
from esper_warehouse.simulator.security import esper_security_state
from esper_warehouse.simulator.wire import Wire
from esper_warehouse.simulator.wire.base import Record

# The truth of tables whose simulated area lives in one module of `routes/` with its records and
# route (e.g. `routes/geofences.py`): registered there, by table name.
TRUTH_BUILDERS: dict[str, Callable[[World], list[Record]]] = {}

TRUTH_TABLES = (
    "devices",
    "heartbeats",
    "groups",
    "blueprints",
    "blueprint_versions",
    "tenant_apps",
    "tenant_app_versions",
    "applications",
    "application_versions",
    "device_apps",
    "command_requests",
    "command_statuses",
    "operations",
    "operation_devices",
    "device_events",
    "status_metrics",
)


def truth_tables() -> tuple[str, ...]:
    """Every table `World.truth` knows: the built-in ones, then the registered areas'."""
    return (*TRUTH_TABLES, *TRUTH_BUILDERS)


# Sort keys for the /v2/devices/ ``ordering`` parameter (field -> key of device index).
_DEVICE_KEYS: dict[str, Callable[[Fleet, int], Any]] = {
    "alias": lambda f, i: f.alias[i],
    "created_at": lambda f, i: f.created[i],
    "last_seen": lambda f, i: f.last_seen[i],
    "model": lambda f, i: C.MODELS[f.model[i]].model,
    "os_version": lambda f, i: (f.os[i], f.osv[i]),
    "name": lambda f, i: f.name[i],
    "serial": lambda f, i: f.serial[i],
    "provisioned_on": lambda f, i: f.provisioned[i],
    "battery_level": lambda f, i: f.battery[i],
    "dpc_version": lambda f, i: (C.OS_PLATFORM[f.os[i]], f.agent[i]),
    "eea_version": lambda f, i: 0,
    "is_gms": lambda f, i: f.is_gms[i],
    "security_state": lambda f, i: esper_security_state(f, i) or "",
    "wifi_ssid": lambda f, i: 0,
    "platform": lambda f, i: C.PLATFORMS[C.OS_PLATFORM[f.os[i]]],
    "template_name": lambda f, i: 0,
    "policy_name": lambda f, i: 0,
    "state": lambda f, i: f.state[i],
}
DEVICE_ORDERINGS = frozenset(_DEVICE_KEYS) | {f"-{k}" for k in _DEVICE_KEYS}


class World:
    """Fleet + wire builder behind one re-entrant lock.

    Every read a route makes and every change ``advance`` makes happens under ``lock``.
    """

    def __init__(
        self,
        n_devices: int,
        seed: int,
        enterprise_id: str,
        start: int,
        link_base: str,
        scenario: str | None = None,
    ) -> None:
        self.lock = threading.RLock()
        tenant_id = derived_id("tenant", enterprise_id)
        self.fleet = Fleet(seed, enterprise_id, tenant_id)
        self.wire = Wire(self.fleet, link_base)
        self._orders: dict[str, tuple[int, list[int]]] = {}
        self.engine = Engine(self.fleet, seed, scenario)
        self.datatap = DataTap(self, keep_from=start - 7 * DAY)
        self.engine.on_midnight = self.datatap.capture
        self.fleet.generate(n_devices, start - HISTORY_DAYS * DAY)
        self.engine.run_until(start)

    # -- clock ---------------------------------------------------------------------------

    @property
    def now(self) -> int:
        """Simulated time, epoch seconds."""
        return self.fleet.now

    def advance(self, hours: float) -> None:
        """Move the fleet on by ``hours`` of simulated time."""
        if hours < 0:
            raise ValueError("hours must be >= 0")
        with self.lock:
            self.engine.run_until(self.fleet.now + round(hours * 3600))

    # -- device orderings ----------------------------------------------------------------

    def device_order(self, ordering: str) -> list[int]:
        """Live device indexes in ``ordering`` (``updated_desc`` is the cursor keyset order).

        Ties break on id, so every ordering is total and stable.
        """
        f = self.fleet
        cached = self._orders.get(ordering)
        if cached is not None and cached[0] == f.version:
            return cached[1]
        live = f.live()
        ids = f.ids
        if ordering == "updated_desc":
            upd = f.updated
            live.sort(key=lambda i: (-upd[i], ids[i]))
        else:
            desc = ordering.startswith("-")
            keyf = _DEVICE_KEYS[ordering.lstrip("-")]
            live.sort(key=lambda i: ids[i])
            live.sort(key=lambda i: keyf(f, i), reverse=desc)
        self._orders[ordering] = (f.version, live)
        return live

    def heartbeat_order(self) -> list[int]:
        """Live, ever-seen devices by (last_seen, id), for the heartbeat time window."""
        f = self.fleet
        cached = self._orders.get("heartbeat")
        if cached is not None and cached[0] == f.version:
            return cached[1]
        ls, ids = f.last_seen, f.ids
        order = [i for i in f.live() if ls[i] >= 0]
        order.sort(key=lambda i: (ls[i], ids[i]))
        self._orders["heartbeat"] = (f.version, order)
        return order

    def group_descendants(self, g: int) -> set[int]:
        """Group ``g`` and all its subgroups."""
        out = {g}
        stack = [g]
        groups = self.fleet.groups
        while stack:
            for c in groups[stack.pop()].children:
                out.add(c)
                stack.append(c)
        return out

    def group_counts(self) -> list[int]:
        """Devices directly in each group (live devices only)."""
        f = self.fleet
        counts = [0] * len(f.groups)
        for i in f.live():
            if f.group[i] != C.NO_GROUP:
                counts[f.group[i]] += 1
        return counts

    # -- reads shared by routes and truth ------------------------------------------------

    def installed(self, i: int) -> list[Record]:
        """Wire records of the apps installed on device ``i`` (route by platform)."""
        f = self.fleet
        plat = f.platform(i)
        if plat == C.ANDROID:
            return [self.wire.device_app_legacy(i, e) for e in f.apps[i]]
        if plat in (C.APPLE, C.WINDOWS):
            tenant = [self.wire.device_app_v2(i, e) for e in f.apps[i]]
            return tenant + self.wire.device_store_apps(i)
        return []

    def events_newest_first(self, i: int) -> list[tuple[int, int, int, int, int]]:
        """Event tuples of device ``i``, newest first (ties: higher id first)."""
        return sorted(self.fleet.events[i], key=lambda e: (e[1], e[0]), reverse=True)

    def commands_newest_first(self) -> list[int]:
        """Command request indexes, newest ``created_at`` first."""
        cmds = self.fleet.commands
        return sorted(range(len(cmds)), key=lambda r: (-cmds[r].created, cmds[r].id))

    def truth(self, table: str) -> list[Record]:
        """Exactly the records the API serves now for ``table`` (see docs/contracts.md)."""
        if table not in truth_tables():
            raise KeyError(f"unknown table {table!r}; known: {', '.join(truth_tables())}")
        with self.lock:
            if table in TRUTH_BUILDERS:
                return TRUTH_BUILDERS[table](self)
            return getattr(self, f"_truth_{table}")()

    def _truth_devices(self) -> list[Record]:
        # The detail record: everything the API holds about a device, patch level included
        # (list items lack it; the warehouse gets it from the legacy list, another route).
        return [self.wire.device_detail(i) for i in self.device_order("updated_desc")]

    def _truth_heartbeats(self) -> list[Record]:
        f = self.fleet
        return [self.wire.heartbeat(i) for i in f.live() if f.last_seen[i] >= 0]

    def _truth_groups(self) -> list[Record]:
        counts = self.group_counts()
        return [self.wire.group(g, counts[g]) for g in range(len(self.fleet.groups))]

    def _truth_blueprints(self) -> list[Record]:
        return [self.wire.blueprint(b) for b in range(len(self.fleet.blueprints))]

    def _truth_blueprint_versions(self) -> list[Record]:
        f = self.fleet
        return [
            self.wire.blueprint(b, v)
            for b in range(len(f.blueprints))
            for v in range(len(f.blueprints[b].versions))
        ]

    def _truth_tenant_apps(self) -> list[Record]:
        return [self.wire.tenant_app(k) for k in range(len(self.fleet.tenant_apps))]

    def _truth_tenant_app_versions(self) -> list[Record]:
        f = self.fleet
        return [
            self.wire.tenant_app_version(k, v)
            for k in range(len(f.tenant_apps))
            for v in range(len(f.tenant_apps[k].versions))
        ]

    def _truth_applications(self) -> list[Record]:
        return [self.wire.application(k) for k in range(len(self.fleet.legacy_apps))]

    def _truth_application_versions(self) -> list[Record]:
        f = self.fleet
        out = []
        for k, app in enumerate(f.legacy_apps):
            for v in range(len(app.versions)):
                rec = self.wire.application_version(k, v)
                rec["application_id"] = app.id
                out.append(rec)
        return out

    def _truth_device_apps(self) -> list[Record]:
        f = self.fleet
        out = []
        for i in f.live():
            route = "legacy" if f.platform(i) == C.ANDROID else "v2"
            for rec in self.installed(i):
                rec["device_id"] = f.ids[i]
                rec["route"] = route
                out.append(rec)
        return out

    def _truth_command_requests(self) -> list[Record]:
        return [self.wire.command(r) for r in self.commands_newest_first()]

    def _truth_command_statuses(self) -> list[Record]:
        return [self.wire.command_status(s) for s in range(len(self.fleet.statuses))]

    def _truth_operations(self) -> list[Record]:
        return [self.wire.operation(o) for o in range(len(self.fleet.operations))]

    def _truth_operation_devices(self) -> list[Record]:
        return [self.wire.operation_device(p) for p in range(len(self.fleet.op_devices))]

    def _truth_device_events(self) -> list[Record]:
        f = self.fleet
        out = []
        for i in f.live():
            for ev in self.events_newest_first(i):
                rec = self.wire.event(i, ev)
                rec["device_id"] = f.ids[i]
                out.append(rec)
        return out

    def _truth_status_metrics(self) -> list[Record]:
        return [self.wire.status_metrics()]  # one object: the counters as of now
