"""The Esper source: every table an Esper tenant holds, loaded incrementally from Arrow pages."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import Any

import dlt
from dlt.common.exceptions import PipelineStateNotAvailable
from dlt.extract.resource import DltResource

from .common import Options
from .http import EsperClient
from .run.ledger import RunLedger
from .run.tail import Tail
from .scan.devices import device_apps, device_census, device_history, devices
from .scan.devices import read_loaded as devices_loaded
from .scan.opening import open_run, plan_full_scan
from .scan.walk import planned_walk
from .settings import SETTINGS, EsperSourceConfiguration
from .tables import LISTS, TABLES, extraction_order, read_from, waits_for_tail
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
from .tables.devices import DEVICE_APPS, DEVICE_CENSUS, DEVICES, heartbeats
from .tables.events import DEVICE_EVENTS, device_events, device_events_of_page


@dlt.source(name="esper", spec=EsperSourceConfiguration)
def esper(
    config: EsperSourceConfiguration = dlt.config.value,
    *,
    api_key_name: str = SETTINGS["api_key"].env,
    base_url_name: str = SETTINGS["base_url"].env,
    client: EsperClient | None = None,
    ledger: RunLedger | None = None,
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
        config: the settings (`settings.py`): dlt resolves them from the environment and
            .dlt/*.toml when none are given; the pipeline passes the ones it resolved and checked.
        api_key_name: where `api_key` came from, named when the API refuses it (a tenant's
            `api_key_env`).
        base_url_name: where `base_url` came from, named when its host is unknown or its TLS
            fails (a tenant's `base_url` entry in its tenants file).
        client: an `EsperClient` to use (the pipeline passes one to read its counters).
        ledger: a `RunLedger` to fill (the pipeline reads it to reconcile after the load).
    """
    c = config
    client = client or EsperClient(
        c.base_url,
        c.api_key,
        c.enterprise_id,
        timeout=c.request_timeout,
        max_retries=c.max_retries,
        max_retry_wait=c.max_retry_wait_s,
        initial_concurrency=c.initial_concurrency,
        max_concurrency=c.max_concurrency,
        key_name=api_key_name,
        url_name=base_url_name,
    )
    lag, heartbeat_start = timedelta(hours=c.lag_hours), timedelta(days=c.heartbeat_start_days)
    opts = Options(lag, c.status_batch_size, heartbeat_start, c.page_size)
    parts = (c.commit_every_devices, c.commit_every_minutes)
    ledger = _opened(client, ledger, c.full_scan, c.full_scan_interval_days, parts, opts)
    data_tap = partial(
        data_tap_resources,
        client,
        c.data_tap_queries or {},
        deadline_s=c.data_tap_deadline_s,
        stuck_s=c.data_tap_stuck_s,
        row_limit=c.data_tap_row_limit,
        poll_s=c.data_tap_poll_s,
        requests_per_hour=c.data_tap_requests_per_hour,
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
    try:
        devices_loaded(ledger, opts)
        activity_loaded(ledger, opts)
    except PipelineStateNotAvailable:
        pass  # the source built outside a pipeline (inspected): no warehouse, every record news
    return ledger


def _resources(
    run: dict[str, Any], data_tap: Callable[[], list[DltResource]]
) -> tuple[DltResource, ...]:
    """This part's resources, in the order derived from their tables' declarations
    (`tables.extraction_order`); `data_tap` after them on the last part."""
    ledger: RunLedger = run["ledger"]

    device_list = devices(**run)
    apps = device_apps(**run)  # scd2: its rows' validity changes at the run's API time
    scd2 = DEVICE_APPS.hints()["write_disposition"]
    apps.apply_hints(write_disposition={**scd2, "boundary_timestamp": ledger.plan.as_of})
    plan = ledger.plan = replace(ledger.plan, building_last=ledger.plan.last_part())
    scope = plan.fan_out_scope
    # Device events are read per device page in a part of a full scan and in a first load (every
    # feed); else, after the tail, the feeds of the devices with activity.
    per_page = not plan.building_last or (plan.full_scan and scope is not None and scope.everything)
    # The devices walk: `devices` and its pipes (dlt evaluates a resource and its transformers
    # together, at the place of the last of them).
    walk = [device_list, device_list | device_history, device_list | apps]
    walk += [device_list | device_events_of_page(**run)] if per_page else []
    if not plan.building_last:  # a full scan in parts: the next devices and their fan-outs
        # the fan-outs that read each page the walk hands out
        planned_walk(ledger).readers = (DEVICE_APPS.name, DEVICE_EVENTS.name)
        return tuple(_ordered(walk, [], Tail()))
    census = [device_census(ledger=ledger)] if plan.full_scan else []  # reads the walk: no gate
    reads = [*census, *_tenant_reads(run), *([] if per_page else [device_events(**run)])]
    tail = Tail()
    return (*_ordered(walk, reads, tail), *(tail.after(read) for read in data_tap()))


def _ordered(walk: list[DltResource], reads: list[DltResource], tail: Tail) -> list[DltResource]:
    """The resources in their tables' order (`tables.extraction_order`), each read after the
    walk gated by `tail`: side by side, each once the reads it is read from
    (`tables.read_from`) have ended, or, when it waits for the tail
    (`tables.waits_for_tail`), once the whole tail has ended (`run/tail.py`)."""
    made = {resource.name: resource for resource in (*walk, *reads)}
    on_walk = {resource.name for resource in walk}
    order = extraction_order({name: t for name, t in TABLES.items() if name in made}, on_walk)
    ordered = []
    for name in order:
        resource, table = made[name], TABLES[name]
        if name in on_walk or name == DEVICE_CENSUS.name:
            ordered.append(resource)
        elif waits_for_tail(table, made, on_walk):
            ordered.append(tail.after(resource))
        else:
            parents = read_from(table) & (set(made) - on_walk)
            ordered.append(tail.after_reads(resource, frozenset(parents)))
    return ordered


def _tenant_reads(run: dict[str, Any]) -> list[DltResource]:
    """The tenant-level reads after the devices scan, in no order (`tables.extraction_order`
    orders them)."""
    blueprint_list, tenant_app_list = blueprints(**run), tenant_apps(**run)
    application_list = applications(**run)
    return [
        heartbeats(**run),
        *(read(**run) for read in LISTS),  # groups, status metrics, ... (tables/__init__.py)
        command_requests(**run),
        command_statuses(**run),
        operations(**run),
        operation_devices(**run),
        # the catalogues with their version lists, each list piped into its versions
        blueprint_list,
        blueprint_list | blueprint_versions(**run),
        tenant_app_list,
        tenant_app_list | tenant_app_versions(**run),
        application_list,
        application_list | application_versions(**run),
    ]


__all__ = ["EsperClient", "EsperSourceConfiguration", "RunLedger", "esper"]
