"""A run's first two requests: prove the key and the enterprise id, read the API's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ..http import EsperClient
from ..run.ledger import RunLedger, RunPlan
from ..run.state import DEVICES_FULL_SCAN_AT, FIRST_LOAD_STARTED, kept_state
from ..tables import DEPENDENTS
from ..tables.catalogues import GROUPS
from ..tables.devices import DEVICES
from ..times import parse_time
from .devices import device_count
from .scope import fan_out_scope
from .walk import DeviceWalk


def open_run(client: EsperClient, ledger: RunLedger, full_scan: bool, interval: timedelta) -> None:
    """Start a run: check the key and the tenant, read the API's clock, decide on a full scan.

    Two requests: the device count (a wrong key fails here, and its `Date` is the API's now, the
    time this run's windows and validity ranges use), then one group (a wrong enterprise id fails
    here; otherwise every Android device's legacy list would look gone). A full scan happens on
    the first run, when asked, or when the last one is older than `interval`.
    """
    ledger.plan = RunPlan(
        client=client, selected=ledger.plan.selected
    )  # the runner reads its counters if a request fails
    ledger.refusals.dependents = DEPENDENTS
    count = device_count(client)
    check_enterprise(client)
    client.settings_proven = True
    as_of = client.server_time or datetime.now(UTC)
    last_full = parse_time(kept_state().get(DEVICES_FULL_SCAN_AT))
    resumed_from = None
    if last_full is None:  # a first load; committed parts of an earlier run make it a resume
        resumed_from = parse_time(kept_state().get(FIRST_LOAD_STARTED))
    ledger.plan = RunPlan(
        client=client,
        as_of=as_of,
        full_scan=bool(full_scan or last_full is None or as_of - last_full >= interval),
        device_count=count,
        completed_full_scan=last_full is not None,
        resumed_from=resumed_from,
        selected=ledger.plan.selected,
    )


def check_enterprise(client: EsperClient) -> None:
    """One tenant-level legacy request: a wrong enterprise id fails here, clearly (404)."""
    client.get(GROUPS.path_for(client), {"limit": 1, "offset": 0})


def plan_full_scan(
    client: EsperClient,
    ledger: RunLedger,
    everything: bool,
    part_size: int,
    limit: int,
    part_minutes: float = 0,
) -> None:
    """Which devices a full scan re-reads the apps and feeds of, and how its list is walked.

    All when asked (`run --full`) or on a first load, else the changed ones and a slice
    (`scope.py`); a run resuming an unfinished first load reads only the devices the warehouse
    does not hold yet. The list is walked in parts (`walk.py`) of `part_size` devices or
    `part_minutes`, whichever ends first; by devices alone (`part_minutes` 0) only when the
    fleet is bigger than one part.
    """
    plan = ledger.plan
    scope = fan_out_scope(plan.as_of, everything=everything, rotate=plan.completed_full_scan)
    parted = part_minutes > 0 or (plan.device_count or 0) > part_size
    seconds = part_minutes * 60 if part_minutes > 0 else None
    walk = DeviceWalk(
        client, DEVICES.path, limit, part_size if parted else None, seconds, ledger=ledger
    )
    ledger.plan = replace(plan, fan_out_scope=scope, walk=walk)
