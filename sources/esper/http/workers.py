"""The client's worker threads: a bounded fan-out (`map_concurrently`, `map_in_order`) and a
one-page read-ahead (`read_one_ahead`), behind `EsperClient.map`, `EsperClient.map_in_order` and
`EsperClient.read_ahead`.

The threads make requests through the client, which paces and limits them; here only the work is
handed out and collected. Every wait is in slices (`wait_interruptibly`) so that Ctrl-C is noticed
at once, and calls `on_interrupt` (the client's `stop`) before re-raising it, so the workers'
requests end now instead of being retried.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import TypeVar

from .errors import STOP_POLL_S

T = TypeVar("T")
R = TypeVar("R")


def wait_interruptibly(wait: Callable[..., T], timed_out: type[Exception]) -> T:
    """Call `wait(timeout=...)` in slices of `STOP_POLL_S` until it returns a value.

    The kernel may deliver Ctrl-C or SIGTERM to any thread of the process, and Python runs
    signal handlers on the main thread only, between two steps of Python code. A main thread
    asleep in an untimed wait (a queue, a future) would notice the signal only when the wait
    ended, possibly minutes later; waking it every slice lets the handler run at once.

    Args:
        wait: A blocking call that takes ``timeout`` and raises `timed_out` when it expires.
        timed_out: The exception `wait` raises on a timeout.
    """
    while True:
        try:
            return wait(timeout=STOP_POLL_S)
        except timed_out:
            continue


def map_concurrently(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    initializer: Callable[[], None] | None,
    on_interrupt: Callable[[], None],
) -> Iterator[R]:
    """`fn(item)` for every item on `workers` threads, in completion order (`EsperClient.map`).

    At most ``2 * workers`` calls are queued at once; the first exception of `fn` is raised
    after cancelling the calls that have not started.
    """
    window = 2 * workers
    source = iter(items)
    # Finished calls queue themselves here (a done-callback): taking the next one is O(1),
    # where `concurrent.futures.wait` would re-register a waiter on every pending call.
    finished: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
    pending: set[Future[R]] = set()
    with ThreadPoolExecutor(
        max_workers=workers,
        thread_name_prefix="esper-map",
        initializer=initializer,
    ) as pool:

        def submit(count: int) -> None:
            for item in islice(source, count):
                future = pool.submit(fn, item)
                pending.add(future)
                future.add_done_callback(finished.put)

        submit(window)
        try:
            while pending:
                future = wait_interruptibly(finished.get, queue.Empty)
                pending.discard(future)
                error = future.exception()
                if error is not None:
                    raise error
                submit(1)  # before yielding: the pool keeps working while the caller does
                yield future.result()
        except KeyboardInterrupt:
            on_interrupt()  # Ctrl-C: the workers' requests end now instead of being retried
            raise
        finally:
            for future in pending:
                future.cancel()


def map_in_order(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    ahead: int,
    on_interrupt: Callable[[], None],
) -> Iterator[R]:
    """`fn(item)` for every item on `workers` threads, in item order (`EsperClient.map_in_order`).

    At most `ahead` calls are started and not yet yielded: a call that ends late holds back the
    calls after it, not just their order, so the results waiting for it stay `ahead` at most
    (in completion order they would pile up without bound). The first exception, in item order,
    is raised after cancelling the calls that have not started.
    """
    source = iter(items)
    started: deque[Future[R]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="esper-map") as pool:

        def submit(count: int) -> None:
            started.extend(pool.submit(fn, item) for item in islice(source, count))

        submit(max(ahead, 1))
        try:
            while started:
                # `exception` waits and raises TimeoutError only for its own timeout
                error = wait_interruptibly(started[0].exception, TimeoutError)
                if error is not None:
                    raise error
                head = started.popleft()
                submit(1)  # before yielding: the pool keeps working while the caller does
                yield head.result()
        except KeyboardInterrupt:
            on_interrupt()  # Ctrl-C: the workers' requests end now instead of being retried
            raise
        finally:
            for future in started:
                future.cancel()


def read_one_ahead(items: Iterator[T], on_interrupt: Callable[[], None]) -> Iterator[T]:
    """Yield from `items` while its next item is produced on another thread (`EsperClient.read_ahead`)."""
    done = object()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="esper-read-ahead") as pool:
        future = pool.submit(next, items, done)
        try:
            while True:
                # Wait with `exception`, which raises TimeoutError only for its own timeout
                # (`result` would also re-raise a TimeoutError of the page walk).
                wait_interruptibly(future.exception, TimeoutError)
                if (item := future.result()) is done:
                    break
                future = pool.submit(next, items, done)
                yield item
        except KeyboardInterrupt:
            on_interrupt()
            raise
        finally:
            future.cancel()
