"""The probes: one small page per route the source reads, through one bounded `EsperClient`.

Hard bounds (constants, not settings): `MAX_REQUESTS` on the wire, 1 + `MAX_RETRIES` per probe
(the transport refuses more, a 429 included) and no probe started after `TIME_BUDGET_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from esper_warehouse.sources.esper.common import apps_route
from esper_warehouse.sources.esper.http import (
    EsperAuthError,
    EsperClient,
    EsperConfigError,
    EsperError,
    EsperNotFoundError,
    EsperResponseError,
)
from esper_warehouse.sources.esper.http.paginators import parse_page
from esper_warehouse.sources.esper.tables import TABLES, read_from, skipped_with
from esper_warehouse.sources.esper.tables.data_tap_jobs import DATA_TAP_PATH
from esper_warehouse.sources.esper.tables.devices import (
    DEVICE_DETAIL_PATH,
    LEGACY_DEVICES_PATH,
    V2_DEVICE_APPS_PATH,
)
from esper_warehouse.sources.esper.tables.pipelines import MEMBERS, MEMBERS_PATH, OPERATIONS_PATH

from ...exit_codes import Exit
from ...shapes import (
    BREAK,
    SET_ASIDE,
    Compare,
    Reference,
    check_answer,
    families,
    norm_path,
    read_paths,
    reference,
    required_paths,
)
from .report import REFUSED, Result, RouteReport

MAX_REQUESTS = 50  # attempts on the wire, retries included; a hard bound (see Doctor.probe)
MAX_RETRIES = 2  # retries of one probe (429, 5xx, timeouts): a probe sends at most 3 requests
MAX_RETRY_WAIT_S = 10.0  # seconds one probe may wait between its attempts (Retry-After, backoff)
BACKOFF_MAX_S = 2.0  # the longest backoff between two attempts without Retry-After
REQUEST_TIMEOUT_S = 15.0  # one request's timeout
TIME_BUDGET_S = 120.0  # no probe starts after this; the whole doctor ends within ~TIME_LIMIT_S
PROBE_LIMIT = 3  # items per list page (the live evidence was recorded at limit 3)
DATA_TAP_POLL_S = 1.0  # between the reads of the probe query's status


class _StatusRecorder(httpx.BaseTransport):
    """The network transport, noting the status of the last answer (the client keeps no status
    for a successful request)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.last: int | None = None
        self.sent = 0
        self.allowed = MAX_REQUESTS  # requests the current probe may still bring the total to

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.sent >= min(self.allowed, MAX_REQUESTS):
            # The client does not count a 429 as a retry: the hard bound is kept here.
            raise _AllowanceSpent(self.last)
        self.sent += 1
        response = self._inner.handle_request(request)
        self.last = response.status_code
        return response

    def close(self) -> None:
        self._inner.close()


class _AllowanceSpent(Exception):
    """A probe used its requests (1 + MAX_RETRIES): the transport sends no more (not an httpx
    error, so the client passes it through without a retry)."""

    def __init__(self, status: int | None) -> None:
        super().__init__(f"the probe's requests are spent (last answer: HTTP {status})")
        self.status = status


class _Stop(Exception):
    """A key, enterprise id or base URL problem: nothing more to probe (exit 2)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)


DATA_TAP_TABLES = "data_tap__<query>"  # every configured Data Tap query's table
# Routes the source reads beside the tables' own: the table a refusal of each one costs a run
# (the legacy list: the devices load without its Android patch levels; the detail is read only
# for devices whose apps an earlier run was refused, so a plain run skips nothing for it).
BESIDE_TABLES = {LEGACY_DEVICES_PATH: ("devices",), V2_DEVICE_APPS_PATH: ("device_apps",),
                 DEVICE_DETAIL_PATH: (), DATA_TAP_PATH: (DATA_TAP_TABLES,),
                 DATA_TAP_PATH + "/{id}": (DATA_TAP_TABLES,),
                 OPERATIONS_PATH: ("pipeline_stage_operations",),
                 **{MEMBERS_PATH + m: ("pipeline_stage_targets",) for m in MEMBERS.values()}}  # fmt: skip


def run_would_skip(template: str) -> tuple[str, ...]:
    """The tables a run skips (whole, or the parts of the records refused) when `template`,
    a route after the first two requests, answers 403/404: the route's table and the tables
    read from it (`tables.DEPENDENTS`), as `sources/esper/common.py` skips them."""
    route = norm_path(template)
    for path, tables in BESIDE_TABLES.items():
        if norm_path(path) == route:
            return tables
    for table in TABLES.values():
        if norm_path(table.path) == route:
            return (table.name,) if "{id}" in table.path else skipped_with(table.name)
    return ()


def _used_paths() -> set[str]:
    paths = {e.path for e in TABLES.values()}
    paths |= set(BESIDE_TABLES)  # routes beside the tables (Data Tap: submit, job status)
    return {norm_path(p) for p in paths}


class Doctor:
    """Runs the probes through one client and keeps their reports."""

    def __init__(
        self, client: EsperClient, recorder: _StatusRecorder, limit: int, max_retries: int
    ) -> None:
        self.client, self.recorder, self.limit = client, recorder, limit
        self.reports: list[RouteReport] = []
        self.used = _used_paths()
        self.skipped: list[str] = []
        self.tables: set[str] = set()  # the raw tables probed so far
        self.refused: set[str] = set()  # the raw tables whose route was refused
        self.bodies: dict[str, Any] = {}  # each probed table's first answer (parents' ids)
        # A probe sends at most 1 + MAX_RETRIES requests: checked before it starts, the request
        # budget is never overrun; nor is the time budget by more than one probe's bound.
        self.attempts_per_probe = 1 + max_retries
        self.deadline = time.monotonic() + TIME_BUDGET_S

    def probe(
        self,
        name: str,
        template: str,
        table: str | None,
        params: Mapping[str, Any] | None = None,
        *,
        parent: str | Mapping[str, str] | None = None,
        method: str = "GET",
        body: Any = None,
        cursor: bool = False,
        first: bool = False,
    ) -> Any:
        """Request one route and compare its answer with the reference; the parsed body or None.

        Args:
            name: What the report calls the probe.
            template: The route with ``{eid}`` and ``{id}`` placeholders (shown as such).
            table: The raw table the route feeds (for the fields the source reads), if any.
            params: Query parameters.
            parent: The id that fills ``{id}``, or each placeholder's (sent, never reported).
            cursor: The ``/v2/devices/`` cursor mode (its envelope has no live recording).
            first: A key/enterprise/base-URL failure here stops the probe (exit 2).
        """
        route = template
        if table is not None:  # and the tables read from the same route (one request for all)
            self.tables |= {table} | {t.name for t in TABLES.values() if t.path == template}
        if self.recorder.sent + self.attempts_per_probe > MAX_REQUESTS:
            self.skipped.append(f"{method} {route}: the request budget ({MAX_REQUESTS}) is spent")
            return None
        if time.monotonic() >= self.deadline:
            self.skipped.append(f"{method} {route}: the time budget ({TIME_BUDGET_S:g} s) is spent")
            return None
        if "{id}" in template and not parent:
            self.skipped.append(
                f"{method} {route}: no id to probe it with ({self._why_no_id(table)})"
            )
            return None
        ref = reference(method, template, cursor=cursor)
        report, compare = _start(name, method, template, table, ref, cursor, self.used)
        self.reports.append(report)
        ids = parent if isinstance(parent, Mapping) else {"id": parent}
        path = template.format(eid=self.client.enterprise_id, **ids)
        before = self.client.totals()
        started = time.monotonic()
        self.recorder.allowed = self.recorder.sent + self.attempts_per_probe
        answer: Any = None
        try:
            if method == "POST":
                answer = self.client.post(path, body)
            else:
                answer = self.client.get(path, params)
            report.status = self.recorder.last
        except EsperError as error:
            report.status = error.status or self.recorder.last
            if self._failed(error, compare, first, per_record="{id}" in template):
                self.refused.add(table or "")
                report.skips = list(run_would_skip(template)) if report.used_by_source else []
        except _AllowanceSpent as spent:
            report.status = spent.status
            compare.add(
                True,
                "route",
                (),
                f"failed (HTTP {spent.status}) after {self.attempts_per_probe} requests",
            )
        finally:
            report.seconds = round(time.monotonic() - started, 3)
            after = self.client.totals()
            report.attempts = after.requests - before.requests
            report.throttled = after.throttled - before.throttled
            report.findings = compare.findings
            if compare.outcome is not None:
                report.outcome = f"{compare.outcome} (HTTP {report.status})"
        if answer is not None:
            if table is not None:
                self.bodies.setdefault(table, answer)
            report.saw(check_answer(answer, ref, compare))
            report.findings = compare.findings
        return answer

    def _why_no_id(self, table: str | None) -> str:
        """Why a per-parent route has no id: its parent list was refused, or it was empty."""
        parents = read_from(TABLES[table]) if table in TABLES else set()
        refused = sorted(parents & self.refused)
        if refused:
            return f"its list ({', '.join(refused)}) was refused"
        return "its list was empty"

    def _failed(
        self, error: EsperError, compare: Compare, first: bool, *, per_record: bool = False
    ) -> bool:
        """Note a failed probe; True when the route is refused (a run would skip its table, or
        count the record's part: a 400 too on a route read per record)."""
        status = f"HTTP {error.status}" if error.status else type(error).__name__
        refused = error.status in (403, 404) or (per_record and error.status == 400)
        if not first and refused:
            # As a run: after the first two requests, a 403/404 skips one table (a partial run).
            compare.add(False, "route", (), f"{REFUSED} (HTTP {error.status})")
            return True
        if isinstance(error, EsperAuthError | EsperConfigError):
            compare.outcome = "key refused" if isinstance(error, EsperAuthError) else "refused"
            raise _Stop(
                f"{compare.route}: the API key was refused ({status})"
                if isinstance(error, EsperAuthError)
                else f"{compare.route}: configuration problem ({type(error).__name__})"
            )
        if isinstance(error, EsperNotFoundError):  # one of the first two requests
            compare.outcome = "not found: enterprise id or base URL"
            raise _Stop(
                f"{compare.route} answered 404: the enterprise id or the base URL is probably wrong"
            )
        problem = (
            "answered a body that is not JSON"
            if isinstance(error, EsperResponseError)
            else f"failed ({status}) after retries"
        )
        compare.add(True, "route", (), problem)
        return False


def _start(
    name: str,
    method: str,
    template: str,
    table: str | None,
    ref: Reference,
    cursor: bool,
    used_paths: set[str],
) -> tuple[RouteReport, Compare]:
    used = norm_path(template) in used_paths
    report = RouteReport(name, method, template, used, ref.basis)
    report.expected_envelope = sorted(families(ref.root))
    label = f"{method} {template}" + (" (cursor mode)" if cursor else "")
    return report, Compare(
        label, used, read_paths(table, ref.record), required_paths(table, ref.record)
    )


def check(
    answer: Any, template: str, table: str | None, *, method: str = "GET", cursor: bool = False
) -> RouteReport:
    """Compare one parsed answer with the reference of its route, without any request.

    Args:
        answer: The parsed JSON body.
        template: The route, e.g. ``"/v2/devices/"`` or ``"/enterprise/{eid}/device/{id}/app/"``.
        table: The raw table the route feeds (for the fields the source reads), if any.
    """
    ref = reference(method, template, cursor=cursor)
    report, compare = _start(template, method, template, table, ref, cursor, _used_paths())
    report.saw(check_answer(answer, ref, compare))
    report.findings = compare.findings
    return report


def _first(body: Any, want: Callable[[dict], bool] = lambda item: True) -> dict | None:
    try:
        items = parse_page(body).items if body is not None else []
    except EsperResponseError:
        return None
    return next((i for i in items if want(i)), None)


def _id(item: dict | None, *names: str) -> str | None:
    for name in names:
        value = (item or {}).get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _probe_all(d: Doctor, data_tap_sql: str | None) -> None:
    e, lim = TABLES, d.limit
    page = {"limit": lim, "offset": 0}
    devices = d.probe(
        "devices, by offset (limit, offset)", e["devices"].path, "devices", page, first=True
    )
    d.probe("groups", e["groups"].path, "groups", page, first=True)
    cursor = d.probe(
        "devices, by cursor (cursor=start)",
        e["devices"].path,
        "devices",
        {"cursor": "start", "limit": lim},
        cursor=True,
    )
    device = _first(devices) or _first(cursor)
    device_id = _id(device, "id")
    android = _first(devices, lambda i: apps_route(i) == "legacy") or device
    apple = _first(devices, lambda i: apps_route(i) == "v2") or device
    d.probe("device detail", "/v2/devices/{id}", "devices", parent=device_id)
    # The legacy list was recorded on an Android device (live route 14), whose Android build
    # fields other platforms leave null: it is compared on one, found by its serial.
    serial = _id(android, "serial") if android and apps_route(android) == "legacy" else None
    if serial:  # the subset's `serial` filter; the serial is sent, never reported
        d.probe("devices (legacy list, an Android device by serial)", LEGACY_DEVICES_PATH,
                "devices", {"serial": serial, **page})  # fmt: skip
    else:
        d.probe("devices (legacy list)", LEGACY_DEVICES_PATH, "devices", page)
    d.probe("device apps (legacy)", e["device_apps"].path, "device_apps", page,
            parent=_id(android, "id"))  # fmt: skip
    d.probe("device apps (v2)", V2_DEVICE_APPS_PATH, "device_apps", page,
            parent=_id(apple, "id"))  # fmt: skip
    for parent_table, child_table in (
        ("blueprints", "blueprint_versions"),
        ("tenant_apps", "tenant_app_versions"),
        ("applications", "application_versions"),
    ):
        body = d.probe(parent_table, e[parent_table].path, parent_table, page)
        parent = _id(_first(body), "id")
        d.probe(child_table, e[child_table].path, child_table, page, parent=parent)
    commands = d.probe("command_requests", e["command_requests"].path, "command_requests", page)
    request_id = _id(_first(commands), "id")
    if request_id:
        d.probe("command_statuses", e["command_statuses"].path, "command_statuses",
                {"request": request_id, **page})  # fmt: skip
    else:
        why = (
            "its list (command_requests) was refused"
            if "command_requests" in d.refused
            else "no command request to ask about"
        )
        d.skipped.append(f"GET {e['command_statuses'].path}: {why}")
    operations = d.probe(
        "operations", e["operations"].path, "operations", {"ordering": "-updated_at", **page}
    )
    operation_id = _id(_first(operations), "id")
    d.probe("operation_devices", e["operation_devices"].path, "operation_devices", page,
            parent=operation_id)  # fmt: skip
    now = d.client.server_time or datetime.now(UTC)
    window = {
        "last_seen_gt": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "last_seen_lt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **page,
    }
    d.probe("heartbeats", e["heartbeats"].path, "heartbeats", window)
    d.probe("device_events", e["device_events"].path, "device_events", page,
            parent=device_id)  # fmt: skip
    d.probe("status_metrics", e["status_metrics"].path, "status_metrics")
    _probe_declared(d, page)
    _probe_stage_members(d, page)
    if data_tap_sql is not None:
        _probe_data_tap(d, data_tap_sql)


def _probe_declared(d: Doctor, page: dict[str, int]) -> None:
    """Every declared table not probed by hand: a list's page; a per-parent route asked about its
    parent's first item, compared by shape, never kept (a user's detail holds the user's API
    token). A parent that has started (`started_at`: a pipeline or stage run) is preferred: a
    run still pending has no children yet to probe the routes below it with."""
    for table in TABLES.values():
        if table.probed_as_list and table.name not in d.tables:
            d.probe(table.name, table.path, table.name, page)
    for table in TABLES.values():
        if table.parent and table.name not in d.tables:
            body = d.bodies.get(table.parent)
            item = _first(body, lambda i: i.get("started_at") is not None) or _first(body)
            d.probe(table.name, table.path, table.name, parent=_id(item, table.parent_key))


def _probe_stage_members(d: Doctor, page: dict[str, int]) -> None:
    """A stage's lists' members: the first operation list's operations, the first target list's
    devices or groups (by its type; that route names the list's pipeline too)."""
    operations = _first(d.bodies.get("pipeline_stage_operations"))
    d.probe("pipeline_stage_operations (operations of a list)", OPERATIONS_PATH,
            "pipeline_stage_operations", page, parent=_id(operations, "id"))  # fmt: skip
    targets = _first(d.bodies.get("pipeline_stage_targets")) or {}
    members = MEMBERS.get(str(targets.get("target_list_type")).upper(), MEMBERS["DEVICES"])
    list_id, pipeline_id = _id(targets, "id"), _id(targets, "pipeline_id")
    targets_list = {"id": list_id, "pipeline_id": pipeline_id} if list_id and pipeline_id else None
    d.probe(f"pipeline_stage_targets ({members.rstrip('/')} of a list)", MEMBERS_PATH + members,
            "pipeline_stage_targets", page, parent=targets_list)  # fmt: skip


def _probe_data_tap(d: Doctor, sql: str) -> None:
    """Submit one small query, then read its status a few times (about 1 s apart)."""
    body = {"query": sql, "is_download": False, "row_limit": 1, "latest_data": True}
    created = d.probe("data tap (submit)", DATA_TAP_PATH, None, method="POST", body=body)
    content = created.get("content") if isinstance(created, dict) else None
    query_id = _id(content if isinstance(content, dict) else None, "id")
    for attempt in range(5):  # the report keeps the last status read
        if not query_id:
            return
        if attempt:
            time.sleep(DATA_TAP_POLL_S)
            d.reports.pop()
        answer = d.probe("data tap (status)", DATA_TAP_PATH + "/{id}", None, parent=query_id)
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, dict) or content.get("status") not in ("PENDING", "RUNNING"):
            return


def probe(
    base_url: str,
    api_key: str,
    enterprise_id: str,
    *,
    data_tap_sql: str | None = None,
    limit: int = PROBE_LIMIT,
    max_retries: int = MAX_RETRIES,
    timeout: float = REQUEST_TIMEOUT_S,
    sleep: Callable[[float], None] | None = None,
) -> Result:
    """Probe a tenant and return the result (nothing printed).

    Raises:
        EsperConfigError: A base URL or key the client refuses before sending anything.
    """
    started = time.monotonic()
    recorder = _StatusRecorder()
    client = EsperClient(
        base_url,
        api_key,
        enterprise_id,
        timeout=timeout,
        max_retries=max_retries,
        backoff_max=BACKOFF_MAX_S,
        max_retry_wait=MAX_RETRY_WAIT_S,
        sleep=sleep,
        initial_concurrency=1,
        min_concurrency=1,
        max_concurrency=1,
        transport=recorder,
        pace=False,  # one request at a time, within MAX_REQUESTS and TIME_BUDGET_S
    )
    d = Doctor(client, recorder, max(1, min(limit, 10)), max_retries)
    stopped = None
    try:
        _probe_all(d, data_tap_sql)
    except _Stop as stop:
        stopped = str(stop)
    finally:
        client.close()
    totals = client.totals()
    severities = {f.severity for r in d.reports for f in r.findings}
    # a run would skip a table, or set records aside: partial
    partial = any(r.skips for r in d.reports) or SET_ASIDE in severities
    code = Exit.CONFIG if stopped else Exit.DRIFT if BREAK in severities else Exit.OK
    code = Exit.PARTIAL if code == Exit.OK and partial else code
    return Result(
        code,
        d.reports,
        recorder.sent,  # requests that reached the wire (the client also counts refused ones)
        totals.retries,
        totals.throttled,
        time.monotonic() - started,
        stopped,
        d.skipped,
    )
