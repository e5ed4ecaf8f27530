"""The ASGI app: routing, auth, faults, stats, the simulated ``Date`` header, control routes.

API routes live under ``/api`` (as on a real tenant); control routes under ``/_sim/`` (no auth).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import Counter
from typing import Any
from urllib.parse import parse_qsl

import orjson
from esper_warehouse.simulator.faults import (
    Faults,
    apply_drift,
    reverse_page,
    rewrite_next,
    swap_page_edges,
)
from esper_warehouse.simulator.http import LEGACY, ApiError, Req, error_body
from esper_warehouse.simulator.routes import ROUTES, Handler, truth_tables
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import http_date, iso

_PARAM = re.compile(r"\{(\w+)\}")


class DroppedConnection(Exception):
    """Raised after the response started, so the server closes the connection mid-reply."""


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)


logging.getLogger("uvicorn.error").addFilter(_DropFilter())


def _compile(template: str) -> re.Pattern[str]:
    pattern = _PARAM.sub(
        lambda m: f"(?P<{m.group(1)}>[^/]+)",
        re.escape(template).replace(r"\{", "{").replace(r"\}", "}"),
    )
    return re.compile(f"^{pattern}$")


class SimApp:
    """ASGI application serving one :class:`World`."""

    def __init__(self, world: World, api_key: str, faults: Faults) -> None:
        self.world = world
        self.api_key = api_key
        self.faults = faults
        self.routes: list[tuple[str, re.Pattern[str], str, str, Handler]] = [
            (m, _compile(t), t, fam, h) for m, t, fam, h in ROUTES
        ]
        # late_events: data that arrives with a clock advance (simulator/faults.py)
        world.engine.after_run = lambda t0, t1: faults.after_advance(world.fleet, t0, t1)
        self.stats_lock = threading.Lock()
        self.route_counts: Counter[str] = Counter()
        self.status_counts: Counter[str] = Counter()

    # -- stats ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Request counts: total, per route template, per status."""
        with self.stats_lock:
            return {
                "total": sum(self.route_counts.values()),
                "routes": dict(self.route_counts),
                "statuses": dict(self.status_counts),
            }

    def reset_stats(self) -> None:
        """Zero the request counts."""
        with self.stats_lock:
            self.route_counts.clear()
            self.status_counts.clear()

    def _count(self, key: str, status: int) -> None:
        with self.stats_lock:
            self.route_counts[key] += 1
            self.status_counts[str(status)] += 1

    # -- ASGI ----------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        body = b""
        if scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            more = True
            while more:
                msg = await receive()
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
        if path.startswith("/_sim/"):
            status, payload = self._control(scope, path, body)
            await self._send(send, status, orjson.dumps(payload))
            return
        if not path.startswith("/api/"):
            await self._send(send, 404, orjson.dumps(error_body(LEGACY, 404, "Not found")))
            return
        await self._api(scope, send, path[4:], body)

    async def _send(
        self, send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        hdrs = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"date", http_date(self.world.now + self.faults.date_offset()).encode()),
        ]
        if headers:
            hdrs.extend(headers)
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        await send({"type": "http.response.body", "body": body})

    def _is_android(self, device_id: str) -> bool:
        """Whether a listed device is Android (unknown ids: True, so the route answers 404)."""
        from esper_warehouse.simulator import catalog

        with self.world.lock:
            i = self.world.fleet.index.get(device_id.lower())
            return i is None or self.world.fleet.platform(i) == catalog.ANDROID

    def _match(self, method: str, api_path: str) -> tuple[str, str, Handler, dict[str, str]] | None:
        for m, rx, template, family, handler in self.routes:
            match = rx.match(api_path)
            if match is not None and m == method:
                return template, family, handler, match.groupdict()
        return None

    async def _api(self, scope: dict[str, Any], send: Any, api_path: str, body: bytes) -> None:
        method = scope["method"]
        found = self._match(method, api_path)
        if found is None and not api_path.endswith("/"):
            found = self._match(method, api_path + "/")
        if (
            found is None
            and api_path.endswith("/")
            and (method == "POST" or not api_path.startswith("/data-tap/"))
        ):
            # The Query API's status path has no trailing slash (live-observations.md section 15);
            # its submission is accepted with one too (section 19)
            found = self._match(method, api_path[:-1])
        if found is None:
            family = LEGACY if api_path.startswith("/enterprise/") else "v2"
            self._count(f"{method} <unmatched>", 404)
            await self._send(send, 404, orjson.dumps(error_body(family, 404, "Not found")))
            return
        template, family, handler, params = found
        key = f"{method} {template}"
        query = dict(
            parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        )
        offset_paging = "cursor" not in query and query.get("offset", "0") not in ("", "0")
        decision = self.faults.decide(api_path, offset_paging)
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.status is not None:
            headers = []
            if decision.retry_after is not None:
                headers.append((b"retry-after", str(decision.retry_after).encode()))
            message = "Rate limit exceeded" if decision.status == 429 else "Simulated server error"
            self._count(key, decision.status)
            payload = orjson.dumps(error_body(family, decision.status, message))
            await self._send(send, decision.status, payload, headers)
            return
        refused = decision.android_only_feed and template.endswith("/download/eventfeed/")
        if refused and not self._is_android(params.get("id", "")):
            self._count(key, 400)
            message = "This API is supported only for Android devices"
            await self._send(send, 400, orjson.dumps(error_body(family, 400, message)))
            return
        if decision.drop:
            self._count(key, 0)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise DroppedConnection(api_path)
        route_params = dict(params)  # `_handle` consumes `eid`
        if decision.cancel_query and api_path.startswith("/data-tap/") and "id" in params:
            with self.world.lock:
                self.world.datatap.cancel(params["id"])
        status, payload = self._handle(scope, query, params, body, family, handler)
        if status == 200 and decision.disorder:
            payload = self._out_of_order(scope, query, route_params, body, family, handler, payload)
        if status == 200 and decision.reverse:
            payload = reverse_page(payload)
        if status == 200 and decision.drift:
            payload = apply_drift(payload, decision.drift)
        if status == 200 and (decision.next_scheme or decision.next_host is not None):
            payload = rewrite_next(payload, decision.next_scheme, decision.next_host)
        if status == 200 and decision.insert:
            with self.world.lock:
                self.world.engine.enroll_now(decision.insert)
        out = orjson.dumps(payload)
        if decision.malformed:
            out = out[: max(1, len(out) // 2)]
        self._count(key, status)
        await self._send(send, status, out)

    def _handle(
        self,
        scope: dict[str, Any],
        query: dict[str, str],
        params: dict[str, str],
        body: bytes,
        family: str,
        handler: Handler,
    ) -> tuple[int, Any]:
        if not self._authorized(scope):
            return 401, error_body(
                family, 401, "Authentication credentials were not provided or are invalid"
            )
        eid = params.pop("eid", None)
        if eid is not None and eid.lower() != self.world.fleet.enterprise_id.lower():
            return 404, error_body(family, 404, f"Enterprise {eid} not found")
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"127.0.0.1").decode("latin-1")
        # links use the scheme the client used (behind a TLS proxy: X-Forwarded-Proto)
        scheme = headers.get(b"x-forwarded-proto", scope.get("scheme", "http").encode())
        origin = f"{scheme.decode('latin-1')}://{host}"
        req = Req(scope["method"], scope["path"], query, params, origin, body)
        try:
            with self.world.lock:
                return handler(self.world, req)
        except ApiError as e:
            return e.status, error_body(family, e.status, e.message)

    def _out_of_order(
        self,
        scope: dict[str, Any],
        query: dict[str, str],
        params: dict[str, str],
        body: bytes,
        family: str,
        handler: Handler,
        payload: Any,
    ) -> Any:
        """The ``out_of_order`` fault: this page's edges swapped with its neighbours' pages."""
        if "cursor" in query:
            return payload
        offset = int(query.get("offset") or 0)
        results = (payload.get("content") or payload) if isinstance(payload, dict) else {}
        limit = int(query.get("limit") or 0) or len((results or {}).get("results") or [])

        def page_at(at: int) -> list[Any]:
            q = {**query, "offset": str(at), "limit": str(limit)}
            status, other = self._handle(scope, q, dict(params), body, family, handler)
            content = (other.get("content") or other) if isinstance(other, dict) else {}
            return (content.get("results") or []) if status == 200 else []

        return swap_page_edges(payload, offset, limit, page_at)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                return value.decode("latin-1") == f"Bearer {self.api_key}"
        return False

    # -- control routes ------------------------------------------------------------------

    def _control(self, scope: dict[str, Any], path: str, body: bytes) -> tuple[int, Any]:
        method = scope["method"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        w = self.world
        try:
            if path == "/_sim/now" and method == "GET":
                return 200, {"now": iso(w.now)}
            if path == "/_sim/advance" and method == "POST":
                w.advance(float(query.get("hours", "24")))
                return 200, {"now": iso(w.now)}
            if path.startswith("/_sim/truth/") and method == "GET":
                table = path.removeprefix("/_sim/truth/").strip("/")
                if table not in truth_tables():
                    return 404, {
                        "error": f"unknown table {table!r}",
                        "tables": list(truth_tables()),
                    }
                return 200, w.truth(table)
            if path == "/_sim/faults" and method == "POST":
                specs = orjson.loads(body or b"[]")
                self.faults.set(specs if isinstance(specs, list) else [specs])
                return 200, {"faults": self.faults.describe()}
            if path == "/_sim/faults" and method == "DELETE":
                self.faults.clear()
                return 200, {"faults": []}
            if path == "/_sim/faults" and method == "GET":
                return 200, {"faults": self.faults.describe()}
            if path == "/_sim/stats" and method == "GET":
                return 200, self.stats()
            if path == "/_sim/stats/reset" and method == "POST":
                self.reset_stats()
                return 200, self.stats()
        except (ValueError, TypeError, orjson.JSONDecodeError) as e:
            return 400, {"error": str(e)}
        return 404, {"error": f"unknown control route {method} {path}"}
