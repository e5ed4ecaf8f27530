"""The public face of the simulator: :class:`Simulator` (see docs/contracts.md, section 1)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from esper_warehouse.simulator.app import SimApp
from esper_warehouse.simulator.faults import Faults
from esper_warehouse.simulator.people import check_scenario
from esper_warehouse.simulator.server import BackgroundServer
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import to_datetime

DEFAULT_START = datetime(2026, 10, 1, tzinfo=UTC)
# Fleet sizes served; the live tenant the shapes were recorded on held 142,632 devices.
MIN_DEVICES, MAX_DEVICES = 10, 250_000


class Simulator:
    """A simulated Esper tenant served over HTTP on 127.0.0.1.

    Use it as a context manager (serves on a free port in a background thread), or mount
    :attr:`app` in any ASGI server.

    Args:
        devices: fleet size, 10 to 250,000 (the live tenant held 142,632).
        seed: same seed (and same ``advance`` calls) -> same fleet and evolution.
        api_key: the only key accepted (``Authorization: Bearer <api_key>``).
        enterprise_id: UUID string; legacy paths with another id answer 404.
        start: simulated time at start (aware UTC); None -> 2026-10-01T00:00:00Z.
        latency_ms: latency added to every API request (with 20 % jitter).
        rate_limit: requests/second of a token bucket answering 429 with Retry-After.
        port: port to serve on (0 = a free one).
        scenario: a named scenario of `simulator.people.SCENARIOS` (e.g. "misused_accounts"),
            or None for the default, coherent tenant.
    """

    def __init__(
        self,
        devices: int = 200,
        seed: int = 7,
        api_key: str = "test-key",
        enterprise_id: str = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
        start: datetime | None = None,
        latency_ms: float = 0,
        rate_limit: float | None = None,
        port: int = 0,
        scenario: str | None = None,
    ) -> None:
        if not MIN_DEVICES <= devices <= MAX_DEVICES:
            raise ValueError(f"devices must be within {MIN_DEVICES}..{MAX_DEVICES}")
        check_scenario(scenario)
        start = start or DEFAULT_START
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware (UTC)")
        self.seed = seed
        self.api_key = api_key
        self.enterprise_id = enterprise_id.lower()
        self._port = port
        self.world = World(
            devices,
            seed,
            self.enterprise_id,
            int(start.timestamp()),
            f"http://127.0.0.1:{port}/api",
            scenario,
        )
        self.faults = Faults(seed)
        self._base_faults: list[dict[str, Any]] = []
        if latency_ms:
            jitter = latency_ms * 0.2
            self._base_faults.append({"kind": "latency", "ms": latency_ms, "jitter_ms": jitter})
        if rate_limit:
            self._base_faults.append(
                {"kind": "rate_limit", "rps": rate_limit, "burst": rate_limit, "retry_after": True}
            )
        self.faults.set(self._base_faults)
        self.app = SimApp(self.world, api_key, self.faults)
        self._server: BackgroundServer | None = None

    # -- serving -------------------------------------------------------------------------

    def start(self) -> Simulator:
        """Start serving in a background thread (idempotent)."""
        if self._server is None:
            self._server = BackgroundServer(self.app, port=self._port)
            self._port = self._server.start()
            with self.world.lock:
                self.world.wire.link_base = f"http://127.0.0.1:{self._port}/api"
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port served on (0 before start when none was given)."""
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/api``: the API base, as on a real tenant."""
        return f"http://127.0.0.1:{self._port}/api"

    # -- clock and truth -----------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """Current simulated time (aware, UTC)."""
        return to_datetime(self.world.now)

    def advance(self, hours: float = 24) -> datetime:
        """Move the fleet on by ``hours`` of simulated time; returns the new time."""
        self.world.advance(hours)
        return self.now

    def truth(self, table: str) -> list[dict[str, Any]]:
        """Exactly the records the API serves now for ``table`` (wire format)."""
        return self.world.truth(table)

    # -- stats and faults ----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``{"total", "routes": {"GET /v2/devices/": n, ...}, "statuses": {"200": n}}``."""
        return self.app.stats()

    def reset_stats(self) -> None:
        """Zero the request counts."""
        self.app.reset_stats()

    def set_faults(self, faults: list[dict[str, Any]]) -> None:
        """Replace the active faults (constructor latency/rate limit included)."""
        self.faults.set(list(faults))

    def clear_faults(self) -> None:
        """Remove every fault, including the constructor's latency and rate limit."""
        self.faults.clear()
