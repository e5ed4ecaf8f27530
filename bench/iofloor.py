"""The I/O floor: fetch the pages a full load fetches, with plain httpx, and do nothing with them.

Its routes are the source's own declarations (`tables.TABLES`, one `Table` per raw table, and
the few routes a resource reads beside its table's: the legacy device list, Apple/Windows apps,
a stage plan's lists), never a hand list: a route added to the source is fetched here too, and
`ROUTES` fails at import when a declaration says something this traversal cannot read (a
per-parent route without a parent, a list needing parameters not planned below).

A minimal traversal at a fixed concurrency (a pool of as many threads as the pipeline's maximum
concurrency): `/v2/devices/` cursor pages one after another, each page's devices fanned out at once
to their installed apps (Android legacy route, Apple/Windows v2) and event feeds; every other
tenant-level list by offset (first page, then the remaining offsets concurrently), each at its
declared page size, then the per-parent lists read from its items (each parent once), level by
level; command statuses in batched `request=` lists. 429 honours `Retry-After`; 5xx and dropped
connections are retried a few times. Bodies are parsed only as far as needed to find ids and the
next page.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from esper_warehouse.sources.esper.common import apps_route
from esper_warehouse.sources.esper.http.paginators import (
    LINKLESS_KEYS,
    CursorPaginator,
    SinglePage,
)
from esper_warehouse.sources.esper.settings import EsperSourceConfiguration
from esper_warehouse.sources.esper.table import MAX_PAGE_SIZE, PAGE_SIZE, Table
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.catalogues import GROUPS
from esper_warehouse.sources.esper.tables.commands import COMMAND_STATUSES
from esper_warehouse.sources.esper.tables.devices import (
    DEVICE_APPS,
    DEVICES,
    HEARTBEAT_AHEAD,
    HEARTBEATS,
    LEGACY_DEVICES_PATH,
    V2_DEVICE_APPS_PATH,
)
from esper_warehouse.sources.esper.tables.pipelines import (
    MEMBERS,
    MEMBERS_PATH,
    OPERATIONS_PATH,
    PIPELINE_STAGE_OPERATIONS,
    PIPELINE_STAGE_TARGETS,
)

Item = dict[str, Any]


def parent_of(table: Table) -> str | None:
    """The table whose items a table's route is read from (its parent, companion or ids)."""
    return table.parent or table.loaded_with or (table.needs[0] if table.needs else None)


# Tenant-level lists that need parameters (`probe=False`, no `{id}`): how each is asked below.
QUERIED = {HEARTBEATS.name: "a last-seen window", COMMAND_STATUSES.name: "`request=` batches"}


@dataclass(frozen=True)
class Routes:
    """Every route the floor reads, from the declarations: each route once (its first table)."""

    lists: tuple[Table, ...]  # tenant-level lists read whole, with the per-parent lists below
    children: dict[str, tuple[Table, ...]]  # parent table -> its per-parent routes

    @classmethod
    def of(cls, tables: Iterable[Table]) -> Routes:
        first: dict[str, Table] = {}
        for table in tables:
            first.setdefault(table.path, table)
        lists: list[Table] = []
        children: dict[str, list[Table]] = {}
        for table in first.values():
            parent = parent_of(table)
            if "{id}" in table.path:
                if parent is None:
                    raise ValueError(f"{table.name}: a per-parent route ({table.path}), no parent")
                children.setdefault(parent, []).append(table)
            elif table.name in QUERIED or table is DEVICES:
                continue  # read by their own task below
            elif not table.probed_as_list:
                raise ValueError(f"{table.name}: needs parameters the floor does not plan")
            else:
                lists.append(table)
        return cls(tuple(lists), {k: tuple(v) for k, v in children.items()})

    def paths(self) -> set[str]:
        """The declared routes the floor reads, and the few beside them (`EXTRA`)."""
        kids = {t.path for level in self.children.values() for t in level}
        return {DEVICES.path, *QUERIED_PATHS, *(t.path for t in self.lists), *kids, *EXTRA}


QUERIED_PATHS = tuple(TABLES[name].path for name in QUERIED)
# Routes a resource reads beside its table's declared one (declared in the source's modules).
EXTRA = (
    LEGACY_DEVICES_PATH,
    V2_DEVICE_APPS_PATH,
    OPERATIONS_PATH,
    *(MEMBERS_PATH + suffix for suffix in MEMBERS.values()),
)
ROUTES = Routes.of(TABLES.values())


@dataclass
class Plan:
    """What the floor fetches; mirrors the pipeline's settings where they shape the requests."""

    page_size: int = MAX_PAGE_SIZE
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
    def limit(self, table: Table) -> int:
        """A route's page size: the run's `page_size`, never more than its declaration allows."""
        return table.limit(self.plan.page_size)

    def offset_list(self, path: str, size: int, params: dict[str, Any] | None = None) -> list[Item]:
        """Every item of an offset-paginated list: first page, then the rest concurrently."""
        base = {**(params or {}), "limit": size}
        first = self.get(path, {**base, "offset": 0})
        results, nxt, count = _envelope(first)
        items = list(results)
        if count is None or (not nxt and count <= len(items)):  # follow `next`, if any
            while nxt:
                page = self.get(nxt)
                results, nxt, _ = _envelope(page)
                items.extend(results)
            return items
        # a count: the remaining offsets at once (a count without links pages so too)
        futures = [
            self.submit(path, {**base, "offset": k * size})
            for k in range(1, math.ceil(count / size))
        ]
        for future in futures:
            items.extend(_envelope(future.result())[0])
        return items

    def read(self, table: Table, path: str | None = None) -> list[Item]:
        """One list of `table`'s route (`path`: a parent's), as its declaration pages it."""
        path = path or table.path.format(eid=self.enterprise_id, id=None)
        if table.paginator is SinglePage:
            body = self.get(path)
            return _envelope(body)[0] if isinstance(body, dict) else []
        return self.offset_list(path, self.limit(table))

    def each_parent(self, reads: list[tuple[Item, Table, str]]) -> list[tuple[Item, list[Item]]]:
        """Many parents' lists at once (one orchestrating thread each, bounded)."""
        if not reads:
            return []
        with ThreadPoolExecutor(min(len(reads), self.concurrency)) as side:
            return list(side.map(lambda r: (r[0], self.read(r[1], r[2])), reads))

    # --- the traversal -------------------------------------------------------------------------
    def tree(self, table: Table) -> None:
        """A tenant-level list, then every per-parent list read from its items."""
        self.below(table, self.read(table))

    def below(self, parent: Table, items: list[Item]) -> None:
        """The per-parent routes of `parent`'s items, each parent once, level after level."""
        for child in ROUTES.children.get(parent.name, ()):
            reads, asked = [], set()
            for item in items:
                value = item.get(child.parent_key)
                if value in (None, "") or value in asked:
                    continue
                asked.add(value)
                reads.append((item, child, child.path.format(eid=self.enterprise_id, id=value)))
            pairs = self.each_parent(reads)
            found = [{**i, "_parent": p} for p, got in pairs for i in got]
            self.below(child, found)
            self.stage_plans(child, found)

    def stage_plans(self, table: Table, items: list[Item]) -> None:
        """A stage's planned lists' own routes: operation lists' operations, target lists'
        devices or groups by the list's type (each list once, as the pipeline reads them)."""
        reads: dict[str, tuple[Item, Table, str]] = {}
        for item in items:
            list_id = item.get("id")
            if list_id in (None, ""):
                continue
            if table is PIPELINE_STAGE_OPERATIONS:
                reads.setdefault(list_id, (item, table, OPERATIONS_PATH.format(id=list_id)))
            elif table is PIPELINE_STAGE_TARGETS:
                members = MEMBERS.get(str(item.get("target_list_type") or "").upper())
                pipeline = item["_parent"].get("pipeline_id")
                if members is not None:
                    path = MEMBERS_PATH.format(pipeline_id=pipeline, id=list_id) + members
                    reads.setdefault(list_id, (item, table, path))
        self.each_parent(list(reads.values()))

    def devices_and_fanout(self) -> int:
        """Cursor pages of devices in sequence; each page's apps and event feeds fanned out."""
        assert DEVICES.paginator is CursorPaginator
        eid = self.enterprise_id
        feeds = [t for t in ROUTES.children.get(DEVICES.name, ()) if t is not DEVICE_APPS]
        pending: list[Future[Any]] = []
        size = self.limit(DEVICES)
        params: dict[str, Any] = {"cursor": "start", "limit": size}
        devices = 0
        for _ in range(100_000):
            page = self.get(DEVICES.path, params)
            content = page.get("content", page)
            for device in content.get("results", []):
                devices += 1
                did = device["id"]
                route = apps_route(device)
                if self.plan.device_apps and route is not None:
                    template = DEVICE_APPS.path if route == "legacy" else V2_DEVICE_APPS_PATH
                    path = template.format(eid=eid, id=did)
                    pending.append(self.pool.submit(self._follow_next, path, DEVICE_APPS))
                for table in feeds if self.plan.device_events else ():
                    path = table.path.format(eid=eid, id=did)
                    pending.append(self.pool.submit(self._follow_next, path, table))
            cursor = content.get("next_cursor")
            if not cursor or content.get("has_more") is False:
                break
            params = {"cursor": cursor, "limit": size}
        self.get(DEVICES.path, {"limit": 1, "offset": 0})  # the pipeline's count, after a scan
        for future in pending:
            future.result()
        return devices

    def legacy_devices(self) -> None:
        """The legacy device list (Android patch levels and build numbers), read whole."""
        size = min(self.plan.page_size, PAGE_SIZE)
        self.offset_list(LEGACY_DEVICES_PATH.format(eid=self.enterprise_id), size)

    def _follow_next(self, path: str, table: Table) -> int:
        """A list read by following `next` (inside a pool thread: never waits on the pool)."""
        page = self.get(path, {"limit": self.limit(table), "offset": 0})
        results, nxt, _ = _envelope(page)
        n = len(results)
        for _ in range(100_000):
            if not nxt:
                break
            results, nxt, _ = _envelope(self.get(nxt))
            n += len(results)
        return n

    def commands(self) -> None:
        """Command requests, then their statuses in `request=` batches (sorted ids)."""
        parent = TABLES[parent_of(COMMAND_STATUSES) or ""]
        ids = sorted(str(r["id"]) for r in self.read(parent))
        size = self.plan.status_batch
        batches = [",".join(ids[i : i + size]) for i in range(0, len(ids), size)]
        path, limit = COMMAND_STATUSES.path, self.limit(COMMAND_STATUSES)
        with ThreadPoolExecutor(min(len(batches), self.concurrency) or 1) as side:
            list(side.map(lambda b: self.offset_list(path, limit, {"request": b}), batches))

    def heartbeats(self) -> None:
        """Last-seen observations in the first load's window (the pipeline's start and end)."""
        if not self.plan.heartbeats:
            return
        now = datetime.fromisoformat(self.api_now) if self.api_now else datetime.now(UTC)
        start = now - timedelta(days=EsperSourceConfiguration.heartbeat_start_days)
        window = {"last_seen_gt": _iso(start), "last_seen_lt": _iso(now + HEARTBEAT_AHEAD)}
        self.offset_list(HEARTBEATS.path, self.limit(HEARTBEATS), window)

    def run(self) -> dict[str, Any]:
        """Fetch everything once; return wall time and counts."""
        started = time.perf_counter()
        # The pipeline's opening requests, so both read the same pages: the device count (the
        # API's clock) and a one-group probe of the enterprise id.
        self.get(DEVICES.path, {"limit": 1, "offset": 0})
        self.get(GROUPS.path.format(eid=self.enterprise_id), {"limit": 1, "offset": 0})
        tasks: list[tuple[str, Callable[[], Any]]] = [
            ("devices", self.devices_and_fanout),
            ("legacy_devices", self.legacy_devices),
            ("commands", self.commands),
            ("heartbeats", self.heartbeats),
            *((t.name, lambda t=t: self.tree(t)) for t in ROUTES.lists if not _read_by(t)),
        ]
        errors: list[str] = []
        results: dict[str, Any] = {}

        def guarded(name: str, task: Callable[[], Any]) -> None:
            try:
                results[name] = task()
            except Exception as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=guarded, args=t, daemon=True) for t in tasks]
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
            "devices": results.get("devices"),
            "concurrency": self.concurrency,
            "routes": sorted(ROUTES.paths()),
            "errors": errors,
        }


def _read_by(table: Table) -> bool:
    """Whether a tenant-level list is read by a task of its own (`Floor.commands`)."""
    return any(parent_of(TABLES[name]) == table.name for name in QUERIED)


def _envelope(body: dict[str, Any]) -> tuple[list[Item], str | None, int | None]:
    """(results, next, count) from a legacy `{count,next,results}`, a v0/v2 `{content: …}` or a
    linkless `{count, roles}` body (`paginators.LINKLESS_KEYS`)."""
    content = body.get("content") if isinstance(body.get("content"), dict) else body
    assert isinstance(content, dict)
    named = next((k for k in LINKLESS_KEYS if k in content and "results" not in content), None)
    return content.get(named or "results") or [], content.get("next"), content.get("count")


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _http_date_iso(value: str | None) -> str:
    if not value:
        return ""
    return email.utils.parsedate_to_datetime(value).isoformat()


def main(argv: list[str] | None = None) -> int:
    """Run the floor once and write its result as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.iofloor")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--enterprise-id", required=True)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--page-size", type=int, default=MAX_PAGE_SIZE)
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
