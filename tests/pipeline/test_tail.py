"""The tail of a run: the tenant-level lists after the devices scan are read side by side, in
side by side, each after what it is read from (sources/esper/run/tail.py), and device events
still come after all of them.

Seen through a recording proxy in front of the simulator: each request of a watched table is
numbered when it arrives and when its answer is back from the simulator (one counter, so the
numbers order the events; no clock is compared).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from esper_warehouse.sources.esper.run.tail import _in_pool
from esper_warehouse.sources.esper.tables import TABLES

from tests.pipeline.helpers import load
from tests.source.test_client import Reply, Seen

# Tenant-level lists none of which is read from another, and the incremental form's
# event feeds. Every request is held ~60 ms by the simulator (a latency fault), so that a list
# read beside another is seen in flight together.
LANE_HEADS = ("groups", "geofences", "command_requests", "operations", "users", "pipelines")
# Two reads of one list each, neither read from the other: a user's profile and groups (two
# resources), a stage run's operations and target runs (one read shared by two tables).
SIBLINGS = {
    "users": ("user_profiles", "user_groups"),
    "pipeline_stage_runs": ("pipeline_stage_run_operations", "pipeline_target_runs"),
}
WATCHED = (*LANE_HEADS, "command_statuses", "operation_devices", "roles", "device_events",
           "pipeline_stage_runs", *(name for pair in SIBLINGS.values() for name in pair))  # fmt: skip
LATENCY = {"kind": "latency", "ms": 60, "jitter_ms": 10}


@dataclass
class Sent:
    table: str
    arrived: int
    answered: int = -1
    path: str = ""
    ids: tuple[str, ...] = ()  # the ids of the items answered


class Recorder:
    """A proxy's record of the watched tables' requests, numbered in one sequence. `routes`:
    more to watch (name -> route template); `hold`: seconds to hold a request before it is
    forwarded (by its name and path)."""

    def __init__(
        self,
        sim: Any,
        routes: dict[str, str] | None = None,
        hold: Callable[[str, str], float] = lambda name, path: 0.0,
    ) -> None:
        base = urlsplit(sim.base_url).path
        watched = {name: TABLES[name].path for name in WATCHED} | (routes or {})
        self.routes = [(name, _route(base, template)) for name, template in watched.items()]
        self.hold = hold
        self.sent: list[Sent] = []
        self.overlaps: set[tuple[str, str]] = set()  # (arriving, already in flight)
        self.most_at_once: set[str] = set()  # the most lists in flight at one time
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._upstream = httpx.Client(
            base_url="{0.scheme}://{0.netloc}".format(urlsplit(sim.base_url))
        )

    def forward(self, seen: Seen) -> Reply:
        table = next(
            (name for name, route in self.routes if route.fullmatch(seen.path.split("?")[0])), None
        )
        sent = None
        if table is not None:
            with self._lock:
                self.overlaps.update((table, s.table) for s in self.sent if s.answered < 0)
                at_once = {table, *(s.table for s in self.sent if s.answered < 0)}
                if len(at_once & set(LANE_HEADS)) > len(self.most_at_once & set(LANE_HEADS)):
                    self.most_at_once = at_once
                sent = Sent(table, next(self._numbers), path=seen.path.split("?")[0])
                self.sent.append(sent)
            time.sleep(self.hold(table, sent.path))
        # `Host` as the client sent it, so the simulator's next links point back at the proxy
        headers = {k: seen.headers[k] for k in ("authorization", "host")}
        answer = self._upstream.request(seen.method, seen.path, headers=headers)
        if sent is not None:
            content = answer.json().get("content") if answer.status_code == 200 else None
            results = content.get("results") if isinstance(content, dict) else None
            with self._lock:
                sent.answered = next(self._numbers)
                sent.ids = tuple(str(i.get("id")) for i in results or [] if isinstance(i, dict))
        kept = {k: answer.headers[k] for k in ("date", "retry-after") if k in answer.headers}
        return Reply(answer.status_code, answer.json(), kept)

    def close(self) -> None:
        self._upstream.close()


def _route(base: str, template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]+\}", template)
    return re.compile(re.escape(base) + "[^/?]+".join(re.escape(p) for p in parts))


def _through_proxy(sim: Any, serve: Any, warehouse: Path, **watch: Any) -> Recorder:
    recorder = Recorder(sim, **watch)
    proxy = serve(recorder.forward)
    try:
        base = proxy.url + urlsplit(sim.base_url).path
        result = load(sim, warehouse, source_options={"base_url": base})
    finally:
        recorder.close()
    assert result.exit_code == 0, result.error
    return recorder


def test_unrelated_lists_are_read_at_the_same_time(sim, serve, tmp_path: Path) -> None:
    """A first load reads unrelated tenant-level lists with requests in flight together (one
    after another, each would wait for the one before to be answered): with each of their
    requests held 0.6 s, all of them are in flight at one time, more than dlt's default of 5
    extract threads (a read holds one while its request waits)."""
    sim.set_faults([LATENCY])

    def hold(name: str, path: str) -> float:
        return 0.6 if name in LANE_HEADS else 0.0

    recorder = _through_proxy(sim, serve, tmp_path / "w.duckdb", hold=hold)

    read = {s.table for s in recorder.sent}
    assert set(LANE_HEADS) <= read, read
    unrelated = {(a, b) for a, b in recorder.overlaps if a != b and {a, b} <= set(LANE_HEADS)}
    assert unrelated, f"no two unrelated lists were in flight together: {sorted(recorder.overlaps)}"
    together = recorder.most_at_once & set(LANE_HEADS)
    assert together == set(LANE_HEADS), f"at most these at once: {sorted(together)}"


def test_two_reads_of_one_list_run_beside_each_other_after_it(sim, serve, tmp_path: Path) -> None:
    """A user's profile and groups are both read from the users, a stage run's operations and
    target runs from the stage runs, neither from the other: each pair is in flight together,
    and neither is asked before the list naming its parent is read (one after the other, each
    wave of a chain such as run -> stage run -> operations -> target runs waited its own
    `Retry-After` under weather). Users are a resource of their own: their reads wait for all
    of it."""
    sim.set_faults([LATENCY])
    recorder = _through_proxy(sim, serve, tmp_path / "w.duckdb")

    def sent(table: str) -> list[Sent]:
        return [s for s in recorder.sent if s.table == table]

    for parent, (one, other) in SIBLINGS.items():
        assert sent(parent) and sent(one) and sent(other), (parent, one, other)
        together = {(one, other), (other, one)} & recorder.overlaps
        assert together, f"{one} and {other} were never in flight together"
    users = SIBLINGS["users"]
    first = min(s.arrived for s in sent(users[0]) + sent(users[1]))
    assert max(s.answered for s in sent("users")) < first, "asked before all users"
    _each_after_its_parent(recorder, "pipeline_stage_runs", SIBLINGS["pipeline_stage_runs"])


def _each_after_its_parent(recorder: Recorder, parent: str, children: tuple[str, ...]) -> None:
    """Each request of `children` names (in its path) an id that a request of `parent` answered
    before it arrived."""
    named_by = {i: s.answered for s in recorder.sent if s.table == parent for i in s.ids}
    for child in (s for s in recorder.sent if s.table in children):
        parent_id = next((i for i in named_by if f"/{i}/" in child.path), None)
        assert parent_id is not None, f"{child.path}: no {parent} answered its id"
        assert named_by[parent_id] < child.arrived, f"{child.path} asked before its {parent}"


# Lists read per item of a per-parent list, within one read of the Pipelines tables.
CHAINS = {
    "pipeline_stage_runs": ("pipeline_stage_run_operations", "pipeline_target_runs"),
    "stage_operation_lists": ("operation_list_operations",),
}
CHAIN_ROUTES = {
    "stage_operation_lists": "/pipelines/v0/stages/{id}/operationlists/",
    "operation_list_operations": "/pipelines/v0/operationlists/{id}/operations/",
}


def test_a_list_s_items_are_read_as_soon_as_their_own_parent_is(sim, serve, tmp_path: Path) -> None:
    """The first list of each chain (a run's stage runs, a stage's operation lists) is held
    0.8 s: the lists the others name are read meanwhile, not after every parent's list (wave by
    wave, each chain waited for its slowest request, under weather one refused and waiting its
    `Retry-After`); and still each after the list naming its parent."""
    held: set[str] = set()

    def hold(name: str, path: str) -> float:
        if name in CHAINS and name not in held:
            held.add(name)
            return 0.8
        return 0.0

    recorder = _through_proxy(sim, serve, tmp_path / "w.duckdb", routes=CHAIN_ROUTES, hold=hold)

    for parent, children in CHAINS.items():
        lists = [s for s in recorder.sent if s.table == parent]
        asked = [s for s in recorder.sent if s.table in children]
        assert len(lists) > 1 and asked, (parent, len(lists), len(asked))
        slowest = lists[0]  # the one held
        early = [s for s in asked if s.arrived < slowest.answered]
        assert early, f"every {children} waited for the {parent} list held"
        _each_after_its_parent(recorder, parent, children)


def test_reads_come_after_their_lists_and_device_events_after_the_whole_tail(
    sim, serve, tmp_path: Path
) -> None:
    """On a nightly run, command statuses are asked once command requests are read (they ask
    the statuses of the new requests), operation devices once operations are, and device events
    once the whole tail has ended (they read which devices had activity in the other tables)."""
    warehouse = tmp_path / "w.duckdb"
    assert load(sim, warehouse).exit_code == 0
    sim.advance(hours=24)
    sim.set_faults([LATENCY])
    recorder = _through_proxy(sim, serve, warehouse)

    def sent(table: str) -> list[Sent]:
        return [s for s in recorder.sent if s.table == table]

    feeds = sent("device_events")
    assert feeds, "the nightly run read no event feed: nothing to order"
    for before, after in [
        ("command_requests", "command_statuses"),
        ("operations", "operation_devices"),
    ]:
        assert sent(before) and sent(after), (before, after)
        assert max(s.answered for s in sent(before)) < min(s.arrived for s in sent(after))
    tail = [s for s in recorder.sent if s.table != "device_events"]
    assert max(s.answered for s in tail) < min(s.arrived for s in feeds)


def test_a_tail_read_closed_before_its_step_ran_closes_at_once() -> None:
    """dlt closes every pipe when a resource fails, cancelling the steps its pool has not
    started. A read of the tail whose step was cancelled must close without waiting for it: it waited for
    ever, and a run whose one table failed hung instead of ending (exit 1 after 300 s in a
    test of `tests/pipeline/test_trust.py`, then by pytest's timeout)."""

    def pages() -> Iterator[int]:
        yield 1

    read = _in_pool(pages())
    step = next(read)  # handed to dlt's pool, which is closed before it runs it
    assert callable(step)
    assert next(read) is None  # asked again: busy
    closed = threading.Thread(target=read.close, daemon=True)
    closed.start()
    closed.join(timeout=10)
    assert not closed.is_alive(), "closing the read waits for a step that will never run"
    step()  # a step that starts after its read was closed does nothing
    assert not step.answer and step.failed is None
