"""What every wire builder shares: the fleet, the legacy links and a few small helpers.

:class:`WireBase` holds the fleet and ``link_base`` (the prefix of legacy URL links, set again
by ``Simulator.start`` once the port is known); the record builders of the other modules in
this package are mixins on it.
"""

from __future__ import annotations

import functools
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import App, Fleet, derived_id

Record = dict[str, Any]

# The ``os`` field as the API spells it, by OS index (catalog.OS_NAMES order).
OS_WIRE = ("Android", "iOS", "iPadOS", "tvOS", "Windows", "Linux")


class WireBase:
    """The fleet a builder reads and the legacy links it writes; ``link_base`` prefixes them."""

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

    # -- shared lookups ------------------------------------------------------------------

    def bp_version_id(self, g: int) -> str:
        """Id of blueprint version ``g`` (an index into ``fleet.bp_versions``)."""
        b, v = self.f.bp_versions[g]
        return self.f.blueprints[b].versions[v].id


@functools.lru_cache(maxsize=200_000)
def mac(serial: str) -> str:
    """The Wi-Fi MAC address of the device with ``serial`` (derived, stable)."""
    h = derived_id("mac", serial).replace("-", "")[:12]
    return ":".join(h[k : k + 2] for k in range(0, 12, 2))


def version_at(app: App, ts: int) -> Any:
    """The newest version of ``app`` published at or before ``ts`` (else the first)."""
    best = app.versions[0]
    for ver in app.versions:
        if ver.created <= ts:
            best = ver
    return best
