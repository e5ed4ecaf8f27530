"""The tenant's status counters (`/v2/enterprise/{eid}/report/status-metrics`): a daily snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC

import dlt
import pyarrow as pa

from ..common import Options, skip_unavailable
from ..http import EsperClient, EsperResponseError
from ..http.paginators import SinglePage
from ..run.ledger import RunLedger
from ..table import INT, JSON, TS, Col, Doc, Table, cols, flat

STATUS_METRICS = Table(
    "status_metrics",
    "/v2/enterprise/{eid}/report/status-metrics",
    ("snapshot_date",),
    paginator=SinglePage,
    columns=(  # a bare object of counters (live route 23) + the snapshot's day
        Col("snapshot_date"),  # ISO date (UTC) of the API's clock: the key
        Col("as_of", TS),  # the API's time of the request
        *cols("recently_added low_battery under_provisioning unprovisioned_devices", INT),
        *cols("secure low_risk medium_risk high_risk total_devices_under_risk", INT),
        Col("unspecified", INT),
        Col("last_seen", JSON),
        *flat("last_seen__first_period last_seen__second_period", INT),
        *flat("last_seen__third_period", INT),
    ),
    doc=Doc(
        read="(one object of counters)",
        kept="one row per day of the API's clock, replaced by a later run the same day: a daily "
        "snapshot of the counters Esper's console shows. Staging (`staging.stg_esper__status_metrics`) "
        "names them: `recently_added_devices`, `low_battery_devices`, `under_provisioning_devices` "
        "(being provisioned or onboarded), `unprovisioned_devices`, the security risk counts "
        "`secure_devices`, `low_risk_devices`, `medium_risk_devices`, `high_risk_devices`, "
        "`devices_under_risk` (low + medium + high), `unspecified_risk_devices` (no risk known), "
        "and `last_seen_first_period_devices`, `…_second_period_…`, `…_third_period_…` (the "
        "API's three last-seen periods; the simulator reads them as within 1 hour, 24 hours, 7 "
        "days, not yet confirmed on a live tenant), `measured_at` (the run's API time). The "
        "numbers are the API's own; nothing is recomputed",
        envelope="bare object",
    ),
)
TABLES = (STATUS_METRICS,)


@dlt.resource(**STATUS_METRICS.hints())
def status_metrics(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """The tenant's status counters as of this run: one row per day of the API's clock.

    The route answers one bare object of counters (live route 23), no list. The row is keyed by
    the UTC date of the run's API time (`RunPlan.as_of`), so a second run the same day replaces
    that day's row and the next day's run adds one: a daily snapshot.
    """
    path = STATUS_METRICS.path_for(client)
    body = None
    with skip_unavailable(ledger, "status_metrics"):
        body = client.get(path)
    if body is None:
        return
    if not isinstance(body, dict):
        raise EsperResponseError(
            f"{path}: expected an object of counters, got {type(body).__name__}"
        )
    assert ledger.plan.as_of is not None  # set by open_run, before any resource runs
    as_of = ledger.plan.as_of.astimezone(UTC)
    row = {**body, "snapshot_date": as_of.date().isoformat(), "as_of": as_of.isoformat()}
    yield STATUS_METRICS.page([row], ledger)


LISTS = (status_metrics,)  # read beside the other tenant-level lists (`tables/__init__.py`)
