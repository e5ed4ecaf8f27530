"""The warehouse file: where the pipeline keeps its working directory, and waiting for its lock.

DuckDB lets one process write a file and refuses it while another process holds it (even a
read-only notebook connection). The loader waits for the lock with a deadline and then fails
naming the cause; it never touches a file it could not lock, so nothing is corrupted.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

import duckdb

from .exit_codes import Exit

log = logging.getLogger("esper_warehouse")

T = TypeVar("T")

# `demo`'s own warehouse file, never the default of another command (commands/__init__.py's
# `DEFAULT_WAREHOUSE`): `status` points at it when the file asked for is missing beside it.
DEMO_WAREHOUSE = Path("demo.duckdb")
LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")


# What DuckDB says of a file that is not a database of its own, or no longer reads as one.
DAMAGED_MARKERS = (
    "not a valid DuckDB database file",
    "Corrupt database file",
    "Could not read enough bytes",
    "database file with version number",  # another DuckDB's storage format
)
# The operating system's words (errno 28, 30, 13) as DuckDB's IO errors quote them.
FULL_MARKERS = ("No space left on device", "Disk quota exceeded")
READ_ONLY_MARKERS = ("Read-only file system", "Permission denied")


# A new warehouse file is written in the storage format of the DuckDB this project locks (1.5),
# not in DuckDB's default (readable back to DuckDB 0.10): its strings compress and scan faster,
# and the models at 150,000 devices build in ~1 s less (docs/decisions.md, "New warehouse files in
# DuckDB 1.5's storage format"). A file that exists keeps the format it has.
STORAGE_VERSION = "v1.5.0"


def create_if_missing(warehouse: Path) -> bool:
    """An empty warehouse file in STORAGE_VERSION when none is there yet (dlt, DuckDB and our
    own connections would create it in DuckDB's default format); True when it was created."""
    if warehouse.exists():
        return False
    duckdb.connect(
        str(warehouse), config={"storage_compatibility_version": STORAGE_VERSION}
    ).close()
    return True


def remove_created(warehouse: Path) -> None:
    """Remove a warehouse file (and DuckDB's write-ahead log beside it) that a run created and
    loaded nothing into: an empty file would pass for a warehouse (`report`, the notebooks)."""
    for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        path.unlink(missing_ok=True)


class WarehouseLocked(Exception):
    """Another process held the warehouse file until the deadline."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and those it wraps (dlt's `exception`, then Python's cause or context, except a
    context the code hid: `raise ... from None` says the error it replaced is not the cause)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        context = None if current.__suppress_context__ else current.__context__
        current = getattr(current, "exception", None) or current.__cause__ or context


# OSErrors that are the network's, never a file's: an SSL error's `errno` is the TLS library's
# own code (1 for `WRONG_VERSION_NUMBER`, which is EPERM's number), a name lookup's is negative.
NETWORK_ERRORS = (ssl.SSLError, socket.gaierror, socket.herror, ConnectionError, TimeoutError)


def _is_files(error: BaseException) -> bool:
    """True for an error that speaks of a file: DuckDB's, or the operating system's about one."""
    if isinstance(error, duckdb.Error):
        return True
    return isinstance(error, OSError) and not isinstance(error, NETWORK_ERRORS)


def _found(
    error: BaseException,
    markers: tuple[str, ...],
    codes: tuple[int, ...] = (),
    *,
    any_error: bool = False,
) -> str:
    """The first line of the first error of the chain saying one of `markers` (or an OSError
    with one of `codes`); "" when none does.

    Only DuckDB's and the operating system's own errors are read unless `any_error`: a wrapper
    quoting an API answer ("Permission denied", in a refused route's message) is no file's problem.
    """
    for item in _chain(error):
        if not any_error and not _is_files(item):
            continue
        if (isinstance(item, OSError) and item.errno in codes) or any(
            marker in str(item) for marker in markers
        ):
            return str(item).strip().splitlines()[0] if str(item).strip() else type(item).__name__
    return ""


def is_lock_error(error: BaseException) -> bool:
    """True when an error (or one it wraps) is DuckDB refusing a file held elsewhere."""
    return bool(_found(error, LOCK_MARKERS, any_error=True))  # dlt's wrappers quote it too


def locked_message(warehouse: Path) -> str:
    """What `status`, `models`, `report` and `publish` say about a warehouse another process holds."""
    return (
        f"{warehouse} is held by another process (a run, a notebook or another DuckDB "
        "connection); nothing was changed: try again when it is released"
    )


def file_problem(warehouse: Path, error: BaseException) -> tuple[Exit, str] | None:
    """The exit code and message of a failure that is the warehouse file's, or None.

    Every command says the same of the same file: held by another process (5), not a DuckDB
    database or damaged (2: no command can use it; a retry would not help), its disk full (1, as
    for memory: nothing of the step was committed), its folder not writable (2), a folder where
    the file should be or a folder that does not exist (2). DuckDB's own
    words follow in parentheses. A damaged file is looked for first: what DuckDB says of it
    is the more specific answer whatever else the chain holds.
    """
    if detail := _found(error, DAMAGED_MARKERS):
        return Exit.CONFIG, (
            f"{warehouse} is not a DuckDB warehouse or is damaged ({detail}); nothing was "
            "changed. Point --warehouse at the right file, or restore it from a backup (a "
            "new file: `esper-warehouse run --full --warehouse NEW.duckdb`)"
        )
    if is_lock_error(error):
        return Exit.LOCKED, locked_message(warehouse)
    if detail := _found(error, FULL_MARKERS, (errno.ENOSPC, errno.EDQUOT)):
        return Exit.FAILED, (
            f"the disk holding {warehouse.parent} is full ({detail}); nothing of this step was "
            "committed: free some space and run again"
        )
    if detail := _found(error, READ_ONLY_MARKERS, (errno.EROFS, errno.EACCES, errno.EPERM)):
        return Exit.CONFIG, (
            f"{warehouse.parent} cannot be written ({detail}); the warehouse file and its "
            "working folder beside it need a folder this user may write: nothing was changed"
        )
    return path_problem(warehouse)


def path_problem(warehouse: Path) -> tuple[Exit, str] | None:
    """Exit 2 and why no warehouse file can be at this path (a folder is there, or its folder
    does not exist); None when one can."""
    if warehouse.is_dir():
        return Exit.CONFIG, (
            f"{warehouse} is a folder, not a warehouse file; pass --warehouse with the file's "
            "path: nothing was changed"
        )
    if not warehouse.parent.is_dir():
        return Exit.CONFIG, (
            f"the folder {warehouse.parent} does not exist; create it or pass --warehouse with a "
            "path in an existing folder: nothing was changed"
        )
    return None


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


def run_lock_path(warehouse: Path) -> Path:
    """The lock file of a warehouse's runs, beside dlt's working directory."""
    folder = working_dir(warehouse.resolve())
    return folder.with_name(folder.name + ".lock")


@contextmanager
def run_lock(
    warehouse: Path,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """One run at a time per warehouse: an exclusive lock on its dlt working directory.

    DuckDB's own lock guards the file only while it is written; two runs would still extract,
    normalize and load packages in one dlt working directory at once (and fail with
    `LoadPackageNotFound`). The lock spans the whole run; the process holding it writes its pid
    into the file so the one waiting can name it. The operating system releases it when the
    holder exits, even when killed.

    Raises:
        WarehouseLocked: another run held it for `timeout_s` seconds (its pid in the message).
    """
    path = run_lock_path(warehouse)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = clock() + timeout_s
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(handle)
                if clock() >= deadline:
                    raise WarehouseLocked(
                        f"another run ({holder}) is in progress on {warehouse} and did not end "
                        f"within {timeout_s:.0f} s (lock_timeout_s); this run loaded nothing. "
                        f"Run again once it has finished (its lock: {path})"
                    ) from None
                if not announced:
                    log.warning(
                        "another run (%s) is in progress on %s; waiting up to %.0f s",
                        holder,
                        warehouse,
                        timeout_s,
                    )
                    announced = True
                sleep(min(0.2, max(deadline - clock(), 0.01)))
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def _holder(handle: IO[str]) -> str:
    """`pid N` of the process holding a run lock, as it wrote it (or `pid unknown`)."""
    handle.seek(0)
    pid = handle.read().strip()
    return f"pid {pid}" if pid.isdigit() else "pid unknown"
