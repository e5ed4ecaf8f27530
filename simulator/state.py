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
        self.engine.plan_pipelines(start)
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
        # The truth is declared beside each route (`routes/<area>.py`); imported here, not at the
        # top, because the area modules import this one.
        from esper_warehouse.simulator.routes import TRUTH

        if table not in TRUTH:
            raise KeyError(f"unknown table {table!r}; known: {', '.join(TRUTH)}")
        with self.lock:
            return TRUTH[table](self)
