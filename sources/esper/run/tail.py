"""The tail of a run read concurrently, in lanes, with the orders the run needs kept.

After the devices scan, a run reads its tenant-level lists and their per-parent reads. One
after another they are ~35 short waves of requests, and a wave with one refused request waits
its `Retry-After` (1 s): under weather the tail is most of a first load. A lane is a list and
the tables read from it (`tables.read_from`), in the source's order; lanes run side by side in
dlt's extract pool (`EXTRACT__WORKERS`, shared with the devices' fan-outs), each lane's
resources one after another. What comes after the lanes (device events, which read what they
saw; Data Tap) waits until every lane has ended.

The waits happen on dlt's main thread, never in a pool thread: a resource that may not start
yet yields None, which dlt's pipe iterator reads as "busy, ask the next resource" (as it reads
a parallel resource whose step is still running). A pool thread that waited for another lane
could hold the very worker that lane needs.

Why the waits see every resource they wait for: the pipeline extracts with
`next_item_mode = "fifo"` (pipelines/run/pipeline.py), where dlt asks the resources in the
source's order, each time from the first; a later resource is asked only once every earlier one
has answered "busy" or ended. So a resource of a lane has started (`_start`) before any later
one is first asked, and a resource not selected in this run never starts and is never waited
for. Under another mode the orders are not kept (nor were they before the lanes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from dlt.extract.resource import DltResource
from dlt.extract.utils import wrap_parallel_iterator


class Tail:
    """The lane resources of one source's tail that have started and not yet ended, by name.

    Written and read on dlt's main thread (a resource starts and ends where dlt asks it for its
    next item); the lock keeps it right if that ever changes.
    """

    def __init__(self) -> None:
        self._running: dict[str, str] = {}  # resource -> its lane
        self._lock = threading.Lock()

    def _start(self, name: str, lane: str) -> None:
        with self._lock:
            self._running[name] = lane

    def _end(self, name: str) -> None:
        with self._lock:
            self._running.pop(name, None)

    def busy(self, lane: str | None = None) -> bool:
        """Whether a lane resource runs (of `lane`; of any lane when None)."""
        with self._lock:
            return any(lane is None or held == lane for held in self._running.values())

    def lane(self, resource: DltResource, lane: str) -> DltResource:
        """Run `resource` in the extract pool, after the lane's resources before it."""
        make, name = _generator(resource), resource.name

        def gated() -> Iterator[Any]:
            self._start(name, lane)  # after the lane's earlier resources (fifo)
            try:
                while self._busy_before(name, lane):
                    yield None
                yield from wrap_parallel_iterator(make())
            finally:
                self._end(name)

        _replace(resource, gated)
        return resource

    def _busy_before(self, name: str, lane: str) -> bool:
        """Whether a resource of `lane` that started before `name` still runs."""
        with self._lock:
            for other, held in self._running.items():  # in the order they started
                if other == name:
                    return False
                if held == lane:
                    return True
        return False

    def after(self, resource: DltResource) -> DltResource:
        """Start `resource` (on dlt's main thread, as before) once every lane has ended."""
        make = _generator(resource)

        def gated() -> Iterator[Any]:
            while self.busy():
                yield None
            yield from make()

        _replace(resource, gated)
        return resource


def _generator(resource: DltResource) -> Callable[[], Iterator[Any]]:
    """What makes the resource's generator, its arguments bound (the source function's call)."""
    if resource.is_transformer:
        raise ValueError(f"{resource.name}: a transformer runs with its parent, not in a lane")
    return resource._pipe.gen  # type: ignore[no-any-return]  # (dlt's own `parallelize` reads it)


def _replace(resource: DltResource, gated: Callable[[], Iterator[Any]]) -> None:
    resource._pipe.replace_gen(gated)  # as dlt's `parallelize` does
