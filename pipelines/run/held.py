"""The DuckDB connection a run holds, and the memory DuckDB may use for the load.

A run opens the warehouse once the file is free and keeps one connection for the reads before
the extract, then another for the load and the bookkeeping after it (dlt would otherwise open and
close the file for every load job and every query).
"""

from __future__ import annotations

from typing import Any

import dlt
import duckdb
from esper_warehouse.sources.esper.http import EsperConfigError

from ..warehouse import with_lock_wait
from .types import RunSettings

# DuckDB's memory for the load when none is set, by fleet size: more memory loads a smaller fleet
# faster; from 100,000 devices the merges into tables that grow with the fleet make a lower limit
# (DuckDB spills beside the file) the difference between 1.6 and 1.5 GB at 150,000 devices
# (docs/decisions.md, "The load's memory follows the fleet").
LOAD_MEMORY = ((100_000, "256MB"), (0, "512MB"))


def load_memory_for(settings: RunSettings, devices: int | None) -> str:
    """The load's memory limit: the one set, else the one for a fleet of `devices`."""
    if settings.load_memory_limit is not None:
        return settings.load_memory_limit
    return next(limit for fleet, limit in LOAD_MEMORY if (devices or 0) >= fleet)


def hold_warehouse(
    settings: RunSettings, devices: int | None = None, what: str = "the load"
) -> Any:
    """DuckDB: one connection, opened once the file is free, for the load and what follows
    (or for the reads before the extract: `what` names them in the wait's log line).

    dlt otherwise opens and closes the file for every load job and every query after it (16
    times in a small nightly, ~45 ms each). Other destinations: None (dlt's own credentials).
    The connection keeps DuckDB's buffers for the whole load, so it gets a memory limit: without
    one a 100,000-device first load reached 1.9 GB in the load alone, with 512 MB 0.9 GB.
    """
    if settings.destination != "duckdb":
        return None
    path = str(settings.warehouse.resolve())
    try:
        limit = load_memory_for(settings, devices)
        return with_lock_wait(
            lambda: duckdb.connect(path, config={"memory_limit": limit}),
            settings.warehouse,
            settings.lock_timeout_s,
            what,
        )
    except duckdb.Error as error:
        if "memory" not in str(error).lower():
            raise
        raise _memory_limit_refused(load_memory_for(settings, devices)) from None


def check_memory_limit(settings: RunSettings) -> None:
    """The load's memory limit is one DuckDB accepts: checked before any request, by DuckDB
    itself on an in-memory database (its own parser is the one that will read it).

    Raises:
        EsperConfigError: not a memory size (`lots`), naming the setting.
    """
    if settings.destination != "duckdb" or settings.load_memory_limit is None:
        return
    try:
        duckdb.connect(":memory:", config={"memory_limit": settings.load_memory_limit}).close()
    except duckdb.Error:
        raise _memory_limit_refused(settings.load_memory_limit) from None


def _memory_limit_refused(value: str) -> EsperConfigError:
    return EsperConfigError(
        f"load_memory_limit {value!r} is not a memory size DuckDB accepts (e.g. 512MB or 2GB; "
        "ESPER_WAREHOUSE__LOAD_MEMORY_LIMIT); nothing was requested or loaded"
    )


def release_warehouse(pipeline: dlt.Pipeline, settings: RunSettings, held: Any) -> None:
    """Close the held DuckDB connection before the extract (after the reads that start a run,
    and between parts); later queries open the file by its path.

    `pipeline.load(credentials=held)` keeps the connection as the destination's credentials: the
    run record written after a later part failed would otherwise meet a closed connection.
    """
    held.close()
    pipeline.destination.config_params["credentials"] = str(settings.warehouse.resolve())
