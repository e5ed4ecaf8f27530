"""The Esper source: every table an Esper tenant holds, loaded incrementally from Arrow pages."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import Any

import dlt
from dlt.extract.resource import DltResource

from . import settings as s
from .common import Options
from .http import EsperClient
from .run.ledger import RunLedger
from .run.tail import Tail
from .scan.devices import device_apps, device_census, device_history, devices
from .scan.devices import read_loaded as devices_loaded
from .scan.opening import open_run, plan_full_scan
from .scan.walk import planned_walk
from .tables import LISTS, TABLES, read_from
from .tables.catalogues import (
    application_versions,
    applications,
    blueprint_versions,
    blueprints,
    tenant_app_versions,
    tenant_apps,
)
from .tables.commands import command_requests, command_statuses, operation_devices, operations
from .tables.commands import read_loaded as activity_loaded
from .tables.data_tap import data_tap_resources
from .tables.devices import DEVICE_APPS, DEVICES, heartbeats
from .tables.events import DEVICE_EVENTS, device_events, device_events_of_page


@dlt.source(name="esper")
def esper(
    api_key: str = dlt.secrets.value,
    base_url: str = dlt.config.value,
    enterprise_id: str = dlt.config.value,
    full_scan: bool = False,
    full_scan_interval_days: float = s.FULL_SCAN_INTERVAL_DAYS,
    lag_hours: float = s.LAG_HOURS,
    page_size: int = s.MAX_PAGE_SIZE,
    status_batch_size: int = s.STATUS_BATCH_SIZE,
    heartbeat_start_days: float = s.HEARTBEAT_START_DAYS,
    initial_concurrency: int = s.INITIAL_CONCURRENCY,
    max_concurrency: int = s.MAX_CONCURRENCY,
    max_retries: int = s.MAX_RETRIES,
    request_timeout: float = s.REQUEST_TIMEOUT_S,
    max_retry_wait_s: float = s.MAX_RETRY_WAIT_S,
    data_tap_queries: dict[str, str] | None = None,
    data_tap_deadline_s: float = s.DATA_TAP_DEADLINE_S,
    data_tap_stuck_s: float = s.DATA_TAP_STUCK_S,
    data_tap_row_limit: int = s.DATA_TAP_ROW_LIMIT,
    data_tap_requests_per_hour: int = s.DATA_TAP_REQUESTS_PER_HOUR,
    data_tap_poll_s: Any = s.DATA_TAP_POLL_S,  # "10,20,30" (environment) or a TOML list
    commit_every_devices: int = s.COMMIT_EVERY_DEVICES,
    commit_every_minutes: float = s.COMMIT_EVERY_MINUTES,
    api_key_name: str = "SOURCES__ESPER__API_KEY",
    base_url_name: str = "SOURCES__ESPER__BASE_URL",
    client: Any = None,
    ledger: Any = None,
) -> tuple[DltResource, ...]:
    """Devices and their history, apps, events, commands, operations and reference lists.

    `open_run` makes two requests first (key, enterprise id, the API's clock) and decides whether
    this run is a full scan. Resources start in the order of `_resources` (`fifo`); the device
    fan-outs run in dlt worker threads per device page; the tenant-level reads after the scan
    side by side, each after the lists it is read from (`run/tail.py`). Device events wait for
    all of them (they read the activity the others saw: `Table.after`); Data Tap comes last.

    A full scan is loaded in parts (`scan/walk.py`) when it lists more than `commit_every_devices`
    devices or `commit_every_minutes` is on: while devices remain, this returns the next part
    (devices, history, installed apps and feeds of the next `commit_every_devices` devices to
    read, or of those read within `commit_every_minutes`); the pipeline loads it, commits, and
    calls again with the same `ledger` and `client` until the last part, the whole tuple. A
    caller that passes no `ledger` cannot ask for a next part: it gets a full scan in one piece.

    Args:
        client: an `EsperClient` to use (the pipeline passes one to read its counters).
        api_key_name: where `api_key` came from, named when the API refuses it (a tenant's
            `api_key_env`).
        base_url_name: where `base_url` came from, named when its host is unknown or its TLS
            fails (a tenant's `base_url` entry in its tenants file).
        ledger: a `RunLedger` to fill (the pipeline reads it to reconcile after the load).
    """
    client = client or EsperClient(
        base_url,
        api_key,
        enterprise_id,
        timeout=request_timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait_s,
        initial_concurrency=initial_concurrency,
        max_concurrency=max_concurrency,
        key_name=api_key_name,
        url_name=base_url_name,
    )
    lag, heartbeat_start = timedelta(hours=lag_hours), timedelta(days=heartbeat_start_days)
    opts = Options(lag, status_batch_size, heartbeat_start, page_size)
    parts = (commit_every_devices, commit_every_minutes)
    ledger = _opened(client, ledger, full_scan, full_scan_interval_days, parts, opts)
    poll_s = s.check_settings({"data_tap_poll_s": data_tap_poll_s})["data_tap_poll_s"]
    data_tap = partial(
        data_tap_resources,
        client,
        data_tap_queries or {},
        deadline_s=data_tap_deadline_s,
        stuck_s=data_tap_stuck_s,
        row_limit=data_tap_row_limit,
        poll_s=poll_s,
        requests_per_hour=data_tap_requests_per_hour,
        ledger=ledger,
    )
    return _resources({"client": client, "ledger": ledger, "opts": opts}, data_tap)


def _opened(
    client: EsperClient,
    ledger: RunLedger | None,
    full_scan: bool,
    interval_days: float,
    parts: tuple[int, float],
    opts: Options,
) -> RunLedger:
    """The run's ledger: opened by its first part (or only one), a full scan's walk planned.

    Parts need a caller that asks for the next one with the same ledger (the pipeline does);
    the source run by dlt alone (no `ledger`) loads a full scan in one piece, the whole tuple.
    The versions within the lag the warehouse holds are read here (`run.state.loaded_versions`):
    a resource's worker thread cannot open the destination.
    """
    in_parts, ledger = ledger is not None, ledger if ledger is not None else RunLedger()
    if not ledger.plan.opened:
        open_run(client, ledger, full_scan, timedelta(days=interval_days))
    if ledger.plan.full_scan and ledger.plan.walk is None:
        devices, minutes = parts if in_parts else (sys.maxsize, 0)
        limit = DEVICES.limit(opts.page_size)
        plan_full_scan(client, ledger, full_scan, devices, limit, minutes)
    devices_loaded(ledger, opts)
    activity_loaded(ledger, opts)
    return ledger


def _resources(
    run: dict[str, Any], data_tap: Callable[[], list[DltResource]]
) -> tuple[DltResource, ...]:
    """This part's resources, in extraction order (see `esper`); `data_tap` on the last part."""
    ledger: RunLedger = run["ledger"]

    device_list = devices(**run)
    apps = device_apps(**run)  # scd2: its rows' validity changes at the run's API time
    scd2 = DEVICE_APPS.hints()["write_disposition"]
    apps.apply_hints(write_disposition={**scd2, "boundary_timestamp": ledger.plan.as_of})
    plan = ledger.plan = replace(ledger.plan, building_last=ledger.plan.last_part())
    if not plan.building_last:  # a full scan in parts: the next devices and their fan-outs
        page_events = device_list | device_events_of_page(**run)
        # the fan-outs that read each page the walk hands out
        planned_walk(ledger).readers = (DEVICE_APPS.name, DEVICE_EVENTS.name)
        return (device_list, device_list | device_history, device_list | apps, page_events)
    # Both forms load the table `device_events` under the resource name `device_events`. dlt
    # starts resources in the order of this tuple, so the per-page form sits next to the apps
    # (the devices scan and its fan-outs start first) and the incremental form comes last.
    scope = plan.fan_out_scope
    if plan.full_scan and scope is not None and scope.everything:  # a first load: every feed
        page_events, last_events = [device_list | device_events_of_page(**run)], []
    else:  # (after parts: the feeds of devices with activity the parts did not read)
        page_events, last_events = [], [device_events(**run)]
    tail = Tail()
    return (
        device_list,
        device_list | device_history,
        device_list | apps,
        *page_events,
        # after every pipe of `devices` (dlt evaluates a resource and its transformers together,
        # at the place of the last of them), so that `devices` has ended the walk
        *([device_census(ledger=ledger)] if plan.full_scan else []),
        *_tail(tail, run),
        *(tail.after(read) for read in last_events),  # they read what the tail saw
        *(tail.after(read) for read in data_tap()),
    )


def _tail(tail: Tail, run: dict[str, Any]) -> list[DltResource]:
    """The tenant-level reads after the scan, side by side, each once the reads listed before
    it that it is read from (`tables.read_from`) have ended (`run/tail.py`)."""
    reads = [
        heartbeats(**run),
        *(read(**run) for read in LISTS),  # groups, status metrics, ... (tables/__init__.py)
        command_requests(**run),
        command_statuses(**run),
        operations(**run),
        operation_devices(**run),
        *_catalogues(run),
    ]
    listed: set[str] = set()
    gated = []
    for read in reads:
        parents = frozenset(read_from(TABLES[read.name]) & listed)
        gated.append(tail.after_reads(read, parents))
        listed.add(read.name)
    return gated


def _catalogues(run: dict[str, Any]) -> tuple[DltResource, ...]:
    """The catalogues with their version lists, each list piped into its versions."""
    blueprint_list, tenant_app_list = blueprints(**run), tenant_apps(**run)
    application_list = applications(**run)
    return (
        blueprint_list,
        blueprint_list | blueprint_versions(**run),
        tenant_app_list,
        tenant_app_list | tenant_app_versions(**run),
        application_list,
        application_list | application_versions(**run),
    )


__all__ = ["EsperClient", "RunLedger", "esper"]
