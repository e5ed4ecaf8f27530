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

import itertools
import threading
from collections.abc import Iterator
from typing import Any

from dlt.extract.resource import DltResource


class Tail:
    """The lane resources of one source's tail that have started and not yet ended, by name.

    Written and read on dlt's main thread (a resource starts and ends where dlt asks it for its
    next item); the lock keeps it right if that ever changes.
    """

    def __init__(self) -> None:
        self._running: dict[str, str] = {}  # resource -> its lane, in the order they started
        self._lock = threading.Lock()
        self._parts = itertools.count()

    def _start(self, name: str, lane: str) -> None:
        with self._lock:
            self._running[name] = lane

    def _end(self, name: str) -> None:
        with self._lock:
            self._running.pop(name, None)

    def busy(self) -> bool:
        """Whether a lane resource (or a transformer of one) still runs."""
        with self._lock:
            return bool(self._running)

    def _busy_before(self, name: str, lane: str) -> bool:
        """Whether a resource of `lane` that started before `name` still runs."""
        with self._lock:
            for other, held in self._running.items():  # in the order they started
                if other == name:
                    return False
                if held == lane:
                    return True
        return False

    def lane(self, resource: DltResource, lane: str) -> DltResource:
        """Run `resource` in the extract pool, after the lane's resources before it; a
        transformer, once per item of its parent, in its parent's lane."""
        if resource.is_transformer:
            return self._transformer(resource, lane)
        make, name = resource._pipe.gen, resource.name  # (dlt's own `parallelize` reads it)

        def gated() -> Iterator[Any]:
            self._start(name, lane)  # after the lane's earlier resources (fifo)
            try:
                while self._busy_before(name, lane):
                    yield None
                yield from _in_pool(make())
            finally:
                self._end(name)

        resource._pipe.replace_gen(gated)  # as dlt's `parallelize` does
        return resource

    def _transformer(self, resource: DltResource, lane: str) -> DltResource:
        step = resource._pipe.gen

        def stepped(item: Any, meta: Any = None) -> Any:
            made = step(item, meta)
            if not isinstance(made, Iterator):
                return made
            # started here, as dlt hands over the parent's item: before the parent can end
            part = f"{resource.name} {next(self._parts)}"
            self._start(part, lane)
            return self._part(part, made)

        resource._pipe.replace_gen(stepped)
        return resource

    def _part(self, part: str, made: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from _in_pool(made)
        finally:
            self._end(part)

    def after(self, resource: DltResource) -> DltResource:
        """Start `resource` (on dlt's main thread, as before) once every lane has ended."""
        make = resource._pipe.gen

        def gated() -> Iterator[Any]:
            while self.busy():
                yield None
            yield from make()

        resource._pipe.replace_gen(gated)
        return resource


def _in_pool(gen: Iterator[Any]) -> Iterator[Any]:
    """`gen`'s steps in dlt's extract pool, its items and its error handed to dlt from here.

    dlt's own parallel wrapper (`dlt.extract.utils.wrap_parallel_iterator`) returns an item
    through the step's future, which dlt may take after the generator has ended; here a
    resource has ended only once dlt holds each of its items, so what waits for it (a lane's
    next resource, device events) finds its transformers already started. An error is raised
    on the main thread, as from a resource that is not parallel.
    """
    while True:
        step = _Step(gen)
        try:
            yield step  # dlt runs a callable item in its extract pool; its result is dropped
            while not step.done.is_set():
                yield None
        except GeneratorExit:  # dlt closes the pipe (another resource failed)
            step.abandon()  # a step dlt cancelled never runs: nothing to wait for
            gen.close()
            raise
        if step.failed is not None:
            raise step.failed
        if not step.answer:
            return
        yield step.answer[0]


class _Step:
    """One `next(gen)`, run by a pool thread: the item, the end of `gen`, or its error.

    When dlt closes the pipes (a resource failed, the run was stopped) it cancels the steps its
    pool has not started: such a step never runs, so closing waits only for a step that started
    (`abandon`); one that starts after that does nothing.
    """

    def __init__(self, gen: Iterator[Any]) -> None:
        self.gen = gen
        self.answer: list[Any] = []  # empty once `gen` has ended
        self.failed: BaseException | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._state = "waiting"  # -> "running" -> done; or "abandoned" before it ran

    def __call__(self) -> None:
        with self._lock:
            if self._state == "abandoned":
                return
            self._state = "running"
        try:
            self.answer.append(next(self.gen))
        except StopIteration:
            pass
        except BaseException as error:  # raised again on the main thread
            self.failed = error
        finally:
            self.done.set()

    def abandon(self) -> None:
        """Before `gen` is closed: the step never runs from now on, or has run to its end."""
        with self._lock:
            running = self._state == "running"
            if not running:
                self._state = "abandoned"
        if running:
            self.done.wait()
