"""A faithful simulator of the Esper device-management API, served on loopback.

``from simulator import Simulator`` — see docs/contracts.md for the interface.
"""

from simulator.core import Simulator

__all__ = ["Simulator"]
