"""The I/O floor: fetch the pages a full load fetches, with plain httpx, and do nothing with them.

A minimal traversal at a fixed concurrency (a pool of as many threads as the pipeline's maximum
concurrency): `/v2/devices/` cursor pages one after another, each page's devices fanned out at once
to their installed apps (legacy route for Android, v2 route for Apple/Windows) and event feeds; every other
list by offset (first page, then the remaining offsets concurrently), with its per-item children
(blueprint, tenant-app and legacy-app versions, operation devices) and command statuses in batched
`request=` lists. 429 honours `Retry-After`; 5xx and dropped connections are retried a few times.
Bodies are parsed only as far as needed to find ids and the next page.

Run: `python -m bench.iofloor --base-url URL --enterprise-id E --concurrency N --out result.json`
with the key in `BENCH_API_KEY`. The harness compares the simulator's per-route request counts for
this run with the pipeline's.
"""

from __future__ import annotations

import argparse
import email.utils
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

PAGE = 1000
EPOCH = "1970-01-01T00:00:00Z"


@dataclass
class Plan:
    """What the floor fetches; mirrors the pipeline's settings where they shape the requests."""

    page_size: int = PAGE
    status_batch: int = 100
    device_apps: bool = True
    device_events: bool = True
    heartbeats: bool = True


@dataclass
class Floor:
    """A fixed-size pool of fetchers sharing one keep-alive httpx client."""

    base_url: str
    api_key: str
    enterprise_id: str
    concurrency: int
    plan: Plan = field(default_factory=Plan)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {self.api_key}", "Accept-Encoding": "gzip"},
            limits=httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
            timeout=httpx.Timeout(120.0),
        )
        self.pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="floor")
        self.requests = 0
        self.retries = 0
        self.api_now = ""
        self._lock = threading.Lock()

    # --- one request ---------------------------------------------------------------------------
    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET a page and parse it; honour 429 Retry-After, retry 5xx/drops a bounded number."""
        for attempt in range(30):
            with self._lock:
                self.requests += 1
            try:
                response = self.client.get(path, params=params)
            except httpx.TransportError:
                self._backoff(attempt, None)
                continue
            if response.status_code == 429 or response.status_code >= 500:
                self._backoff(attempt, response.headers.get("Retry-After"))
                continue
            response.raise_for_status()
            if not self.api_now:
                self.api_now = _http_date_iso(response.headers.get("Date"))
            return orjson.loads(response.content)
        raise RuntimeError(f"gave up on {path} after 30 attempts")

    def _backoff(self, attempt: int, retry_after: str | None) -> None:
        with self._lock:
            self.retries += 1
        delay = min(0.1 * 2**attempt, 5.0)
        if retry_after:
            try:
                delay = float(retry_after)
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(retry_after)
                delay = max(0.0, parsed.timestamp() - time.time())
        time.sleep(min(delay, 30.0))

    def submit(self, path: str, params: dict[str, Any] | None = None) -> Future[dict[str, Any]]:
        return self.pool.submit(self.get, path, params)

    # --- lists ---------------------------------------------------------------------------------
    def offset_list(self, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of an offset-paginated list: first page, then the rest concurrently."""
        size = self.plan.page_size
        base = {**(params or {}), "limit": size}
        first = self.get(path, {**base, "offset": 0})
        results, nxt, count = _envelope(first)
        items = list(results)
        if not nxt:
            return items
        if count is None:  # no count: follow `next` one page at a time
            while nxt:
                page = self.get(nxt)
                results, nxt, _ = _envelope(page)
                items.extend(results)
            return items
        futures = [
            self.submit(path, {**base, "offset": k * size})
            for k in range(1, math.ceil(count / size))
        ]
        for future in futures:
            items.extend(_envelope(future.result())[0])
        return items

    def each_offset_list(
        self, paths: Iterable[str], params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Offset lists of many children at once (one orchestrating thread each, bounded)."""
        paths = list(paths)
        with ThreadPoolExecutor(min(len(paths), self.concurrency) or 1) as side:
            pages = list(side.map(lambda p: self.offset_list(p, params), paths))
        return [item for page in pages for item in page]

    # --- the traversal -------------------------------------------------------------------------
    def devices_and_fanout(self) -> int:
        """Cursor pages of devices in sequence; each page's apps and event feeds fanned out."""
        eid = self.enterprise_id
        pending: list[Future[Any]] = []
        params: dict[str, Any] = {"cursor": "start", "limit": self.plan.page_size}
        devices = 0
        for _ in range(100_000):
            page = self.get("/v2/devices/", params)
            content = page.get("content", page)
            for device in content.get("results", []):
                devices += 1
                did = device["id"]
                route = _apps_route(device)
                if self.plan.device_apps and route == "legacy":
                    path = f"/enterprise/{eid}/device/{did}/app/"
                    pending.append(self.pool.submit(self._follow_next, path))
                elif self.plan.device_apps and route == "v2":
                    path = f"/v2/devices/{did}/device-apps/"
                    pending.append(self.pool.submit(self._follow_next, path))
                if self.plan.device_events:
                    feed = f"/enterprise/{eid}/device/{did}/download/eventfeed/"
                    pending.append(self.pool.submit(self._follow_next, feed))
            cursor = content.get("next_cursor")
            if not cursor or content.get("has_more") is False:
                break
            params = {"cursor": cursor, "limit": self.plan.page_size}
        self.get("/v2/devices/", {"limit": 1, "offset": 0})  # the pipeline's count, after a scan
        for future in pending:
            future.result()
        return devices

    def _follow_next(self, path: str) -> int:
        """A list read by following `next` (inside a pool thread: never waits on the pool)."""
        page = self.get(path, {"limit": self.plan.page_size})
        results, nxt, _ = _envelope(page)
        n = len(results)
        for _ in range(100_000):
            if not nxt:
                break
            results, nxt, _ = _envelope(self.get(nxt))
            n += len(results)
        return n

    def commands(self) -> None:
        requests = self.offset_list("/commands/v0/commands/")
        ids = sorted(str(r["id"]) for r in requests)  # batched like the pipeline: sorted ids
        size = self.plan.status_batch
        batches = [",".join(ids[i : i + size]) for i in range(0, len(ids), size)]
        with ThreadPoolExecutor(min(len(batches), self.concurrency) or 1) as side:
            list(
                side.map(
                    lambda b: self.offset_list("/commands/v0/status/", {"request": b}), batches
                )
            )

    def operations(self) -> None:
        ops = self.offset_list("/v0/operations/", {"ordering": "-updated_at"})
        self.each_offset_list(f"/v0/operations/{op['id']}/devices/" for op in ops)

    def catalogue(self) -> None:
        eid = self.enterprise_id
        self.offset_list(f"/enterprise/{eid}/devicegroup/")
        blueprints = self.offset_list("/v2/blueprints/")
        self.each_offset_list(f"/v2/blueprints/{b['id']}/versions/" for b in blueprints)
        apps = self.offset_list("/v2/tenant-apps")
        self.each_offset_list(f"/v2/tenant-apps/{a['id']}/versions" for a in apps)
        legacy = self.offset_list(f"/enterprise/{eid}/application/")
        self.each_offset_list(f"/enterprise/{eid}/application/{a['id']}/version/" for a in legacy)

    def heartbeats(self) -> None:
        if self.plan.heartbeats:
            now = self.api_now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.offset_list("/v2/heartbeat/", {"last_seen_gt": EPOCH, "last_seen_lt": now})

    def run(self) -> dict[str, Any]:
        """Fetch everything once; return wall time and counts."""
        started = time.perf_counter()
        # The pipeline's opening requests, so both read the same pages: the device count (the
        # API's clock) and a one-group probe of the enterprise id.
        self.get("/v2/devices/", {"limit": 1, "offset": 0})
        self.get(f"/enterprise/{self.enterprise_id}/devicegroup/", {"limit": 1, "offset": 0})
        tasks: list[Callable[[], Any]] = [
            self.devices_and_fanout,
            self.commands,
            self.operations,
            self.catalogue,
            self.heartbeats,
        ]
        errors: list[str] = []
        results: dict[str, Any] = {}

        def guarded(task: Callable[[], Any]) -> None:
            try:
                results[task.__name__] = task()
            except Exception as exc:
                errors.append(f"{task.__name__}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=guarded, args=(t,), daemon=True) for t in tasks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        self.pool.shutdown(wait=True)
        self.client.close()
        return {
            "wall_s": wall,
            "requests": self.requests,
            "retries": self.retries,
            "devices": results.get("devices_and_fanout"),
            "concurrency": self.concurrency,
            "errors": errors,
        }


def _envelope(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None, int | None]:
    """(results, next, count) from a legacy `{count,next,results}` or v0/v2 `{content: …}` body."""
    content = body.get("content") if isinstance(body.get("content"), dict) else body
    assert isinstance(content, dict)
    return content.get("results") or [], content.get("next"), content.get("count")


def _apps_route(device: dict[str, Any]) -> str | None:
    """Where a device's installed apps are listed: Android legacy, Apple/Windows v2, else none."""
    kind = f"{device.get('platform')} {device.get('os')}".lower()
    if "android" in kind:
        return "legacy"
    if any(p in kind for p in ("apple", "ios", "windows", "tvos", "macos")):
        return "v2"
    return None


def _http_date_iso(value: str | None) -> str:
    if not value:
        return ""
    return email.utils.parsedate_to_datetime(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: list[str] | None = None) -> int:
    """Run the floor once and write its result as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.iofloor")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--enterprise-id", required=True)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--page-size", type=int, default=PAGE)
    parser.add_argument("--status-batch", type=int, default=100)
    parser.add_argument("--no-heartbeats", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    plan = Plan(
        page_size=args.page_size,
        status_batch=args.status_batch,
        heartbeats=not args.no_heartbeats,
    )
    floor = Floor(
        args.base_url, os.environ["BENCH_API_KEY"], args.enterprise_id, args.concurrency, plan
    )
    result = floor.run()
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
