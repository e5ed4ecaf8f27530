"""A faithful simulator of the Esper device-management API, served on loopback.

``from esper_warehouse.simulator import Simulator`` — see docs/contracts.md for the interface.
"""

from esper_warehouse.simulator.core import Simulator

__all__ = ["Simulator"]
