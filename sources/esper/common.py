"""Shared by the tables' resources: the run's options, and what a refused route or device means.

A table whose tenant-level route is refused (a scope, a plan feature) is skipped and named
(`skip_unavailable`); a device whose route refuses it is skipped and counted
(`skip_refused_device`). Neither ends the night.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import dlt

from .http import EsperAPIError, EsperError, EsperUnavailableError
from .run.ledger import RunLedger

log = logging.getLogger("esper_warehouse.source")

ROWS_PER_BATCH = 20_000  # fan-out rows gathered into one Arrow table before it goes to dlt


@dataclass(frozen=True)
class Options:
    """The settings the resources read (see `settings.py` for their defaults)."""

    lag: timedelta
    status_batch_size: int
    heartbeat_start: timedelta
    page_size: int | None = None  # None: each endpoint's own (the largest the route allows)


def apps_route(item: dict) -> str | None:
    """Where a device's apps are listed: Android legacy route, Apple/Windows v2, else none."""
    platform = f"{item.get('platform')} {item.get('os')}".lower()
    if "android" in platform:
        return "legacy"
    if any(p in platform for p in ("apple", "ios", "windows", "tvos", "macos")):
        return "v2"
    return None


@contextmanager
def skip_unavailable(ledger: RunLedger, table: str) -> Iterator[None]:
    """Skip `table` for this run when the API refuses one of its tenant-level routes.

    The client raises `EsperUnavailableError` (a 403/404 after `open_run` proved the settings);
    this names the table, records it in the ledger, logs one line and ends the resource
    quietly, so the exception never crosses dlt's extract (no half-run generators).
    """
    try:
        yield
    except EsperUnavailableError as error:
        ledger.mark_unavailable(table or error.table, error)
        keep_what_was_loaded()


def keep_what_was_loaded() -> None:
    """Let the table of the resource running now keep its rows although it yields nothing.

    dlt truncates the table of a `replace` resource that yielded no data at the end of the
    extract; a table skipped in this run (refused route, Data Tap quota) must instead keep what
    earlier runs loaded. An empty `append` changes nothing, and the next run's resource is
    `replace` again.
    """
    try:
        resource = dlt.current.resource()
    except Exception:  # not inside a pipeline's extract (a resource iterated by hand)
        return
    if resource.write_disposition == "replace":
        resource.apply_hints(write_disposition="append")


DEVICE_REFUSALS = {
    400: "the route does not serve this device: the legacy routes are Android only",
    403: "refused for this device: a scope or plan feature",
}


def skip_refused_device(ledger: RunLedger, table: str, error: EsperError) -> bool:
    """True (and counted) when one device's route refused it (400/403): skip that device's part.

    Nothing of the device is loaded, so its watermark (taken from the loaded rows) does not
    move and the next run asks again. Other errors are the run's: the caller re-raises them.
    """
    refused = isinstance(error, EsperAPIError | EsperUnavailableError)
    if not refused or error.status not in DEVICE_REFUSALS or error.route is None:
        return False
    ledger.skip_device(table, error.route, error.status, DEVICE_REFUSALS[error.status])
    return True
