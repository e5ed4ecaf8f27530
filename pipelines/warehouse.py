"""The warehouse file: where the pipeline keeps its working directory, and waiting for its lock.

DuckDB lets one process write a file and refuses it while another process holds it (even a
read-only notebook connection). The loader waits for the lock with a deadline and then fails
naming the cause; it never touches a file it could not lock, so nothing is corrupted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("esper_warehouse")

T = TypeVar("T")
LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")


class WarehouseLocked(Exception):
    """Another process held the warehouse file until the deadline."""


def is_lock_error(error: BaseException) -> bool:
    """True when an error (or one it wraps) is DuckDB refusing a file held elsewhere."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(marker in str(current) for marker in LOCK_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def working_dir(warehouse: Path) -> Path:
    """dlt's working directory for a warehouse: beside the file, never in ~/.dlt."""
    return warehouse.parent / f".{warehouse.name}.dlt"


def with_lock_wait(
    action: Callable[[], T], warehouse: Path, timeout_s: float, what: str = "the warehouse"
) -> T:
    """Run `action`; while it fails because the file is locked, wait and retry until the deadline.

    Raises:
        WarehouseLocked: still locked at the deadline (the message names the file and the cause).
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    announced = False
    while True:
        try:
            return action()
        except Exception as error:
            if not is_lock_error(error):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise WarehouseLocked(
                    f"{warehouse} is held by another process (a notebook or another DuckDB "
                    f"connection, even read-only) and was not released within {timeout_s:.0f} s; "
                    "close it and run again (nothing was written; loaded data is kept pending "
                    "and is loaded by the next run)"
                ) from None
            if not announced:
                log.warning(
                    "%s is locked by another process; waiting up to %.0f s for %s",
                    warehouse,
                    timeout_s,
                    what,
                )
                announced = True
            time.sleep(min(delay, max(left, 0.01)))
            delay = min(delay * 2, 5.0)


def wait_for_file(warehouse: Path, timeout_s: float) -> None:
    """Block until the DuckDB file can be opened for writing (or does not exist yet)."""
    import duckdb

    if not warehouse.exists():
        return

    def probe() -> None:
        duckdb.connect(str(warehouse)).close()

    with_lock_wait(probe, warehouse, timeout_s)
