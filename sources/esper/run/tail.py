"""The tail of a run read concurrently, with the orders the run needs kept.

After the devices scan, a run reads its tenant-level lists and their per-parent reads. One
after another they are ~35 short waves of requests, and a wave with one refused request waits
its `Retry-After` (1 s): under weather the tail is most of a first load. So the tail's
resources run side by side in dlt's extract pool (`EXTRACT__WORKERS`, shared with the devices'
fan-outs), each once the resources it is read from (`tables.read_from`: its parent list, the
ids it asks for) have ended: the lists at once, a per-parent read after its list, two reads of
the same list (a user's profile and groups) beside each other. What comes after the tail
(device events, which read what it saw; Data Tap) waits until every resource of it has ended.

The waits happen on dlt's main thread, never in a pool thread: a resource that may not start
yet yields None, which dlt's pipe iterator reads as "busy, ask the next resource" (as it reads
a parallel resource whose step is still running). A pool thread that waited for another
resource could hold the very worker that resource needs.

Why the waits see every resource they wait for: the pipeline extracts with
`next_item_mode = "fifo"` (pipelines/run/pipeline.py), where dlt asks the resources in the
source's order, each time from the first; a later resource is asked only once every earlier one
has answered "busy" or ended. So a resource read from another listed before it finds it started
(`_start`) when first asked, and a resource not selected in this run never starts and is never
waited for. A read waits for its parent, which waits for its own: the order holds down a chain.
Under another mode the orders are not kept (nor were they before the tail ran concurrently).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

from dlt.extract.resource import DltResource


class Tail:
    """The resources of one source's tail that have started and not yet ended.

    Written and read on dlt's main thread (a resource starts and ends where dlt asks it for its
    next item); the lock keeps it right if that ever changes.
    """

    def __init__(self) -> None:
        self._running: dict[str, str] = {}  # a resource or a transformer's part -> its resource
        self._lock = threading.Lock()
        self._parts = itertools.count()

    def _start(self, name: str, resource: str) -> None:
        with self._lock:
            self._running[name] = resource

    def _end(self, name: str) -> None:
        with self._lock:
            self._running.pop(name, None)

    def busy(self) -> bool:
        """Whether a resource of the tail (or a transformer's part) still runs."""
        with self._lock:
            return bool(self._running)

    def _running_any(self, resources: frozenset[str]) -> bool:
        """Whether one of `resources` (or a part of one) still runs."""
        with self._lock:
            return any(resource in resources for resource in self._running.values())

    def after_reads(self, resource: DltResource, read_from: frozenset[str]) -> DltResource:
        """Run `resource` in the extract pool once the resources it is `read_from` have ended;
        a transformer, once per item of its parent (dlt hands it over as its parent runs)."""
        if resource.is_transformer:
            return self._transformer(resource)
        make, name = resource._pipe.gen, resource.name  # (dlt's own `parallelize` reads it)

        def gated() -> Iterator[Any]:
            self._start(name, name)  # before the resources after it are first asked (fifo)
            try:
                while self._running_any(read_from):
                    yield None
                yield from _in_pool(make())
            finally:
                self._end(name)

        resource._pipe.replace_gen(gated)  # as dlt's `parallelize` does
        return resource

    def _transformer(self, resource: DltResource) -> DltResource:
        step = resource._pipe.gen

        def stepped(item: Any, meta: Any = None) -> Any:
            made = step(item, meta)
            if not isinstance(made, Iterator):
                return made
            # started here, as dlt hands over the parent's item: before the parent can end
            part = f"{resource.name} {next(self._parts)}"
            self._start(part, resource.name)
            return self._part(part, made)

        resource._pipe.replace_gen(stepped)
        return resource

    def _part(self, part: str, made: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from _in_pool(made)
        finally:
            self._end(part)

    def after(self, resource: DltResource) -> DltResource:
        """Start `resource` (on dlt's main thread, as before) once the whole tail has ended."""
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
    resource has ended only once dlt holds each of its items, so what waits for it (a read of
    its items, device events) finds its transformers already started. An error is raised
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
