"""What the API can do wrong: throttling, errors, drops, bad pages, slow pages, moving lists."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import dlt
import duckdb
import httpx
import orjson
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import PIPELINE_NAME, run
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.pipelines.warehouse import working_dir
from esper_warehouse.simulator import faults as simulator_faults
from esper_warehouse.sources.esper.http import EsperClient
from esper_warehouse.sources.esper.http.pages import read_all

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import TABLES, compare, load, reading, rows, settings, with_body

EVENTS = "/enterprise/*/device/*/download/eventfeed/*"
APPS = "/enterprise/*/device/*/app/*"


def cursors(wh: Path) -> dict[str, Any]:
    pipeline = dlt.attach(PIPELINE_NAME, pipelines_dir=str(working_dir(wh.resolve())))
    return dict(pipeline.state["sources"]["esper"]["cursors"])  # type: ignore[index]


def count(wh: Path, table: str) -> int:
    return len(rows(wh, table, ("1",)))


# Each transient fault is the client's to absorb, and tests/source/test_client.py pins each one
# (429 without Retry-After, 5xx, timeouts, dropped connections, slow answers, malformed JSON).
# Whole runs through `429` and `5xx` stay in `make test`; the other four are the slow tier's
# (`make bench`; docs/decisions.md, "The slow tier").
SLOW = pytest.mark.slow


class SleepClock:
    """Monotonic seconds that move only when something sleeps on them.

    The client's waits (`sleep`, `clock`) and the simulator's token bucket read it, so a rate
    limit refills by exactly the waits the client made, with no real time spent waiting.
    """

    def __init__(self) -> None:
        self._now = 1_000.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._now += max(seconds, 0.0)


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param([{"kind": "rate_limit", "route": EVENTS, "rps": 40, "burst": 10}], id="429"),
        pytest.param(
            [
                {
                    "kind": "rate_limit",
                    "route": APPS,
                    "rps": 40,
                    "burst": 5,
                    "retry_after": False,
                    "times": 15,
                }
            ],
            id="429-no-retry-after",
            marks=SLOW,
        ),
        pytest.param(
            [
                {"kind": "status", "status": 503, "times": 6},
                {"kind": "status", "status": 502, "route": EVENTS, "probability": 0.2, "times": 10},
            ],
            id="5xx",
        ),
        pytest.param([{"kind": "drop", "probability": 0.1, "times": 8}], id="drop", marks=SLOW),
        pytest.param(
            [{"kind": "malformed", "route": "/v2/devices/", "times": 2}], id="malformed", marks=SLOW
        ),
        pytest.param(
            [{"kind": "slow", "route": "/v2/heartbeat/", "seconds": 2.5, "times": 1}],
            id="slow",
            marks=SLOW,
        ),
    ],
)
def test_the_run_completes_through_transient_faults(
    sim, wh: Path, faults: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    options: dict[str, Any] = {"timeout": 1.5}
    if faults[0]["kind"] == "rate_limit":  # Retry-After waits of >= 1 s: on a shared clock
        clock = SleepClock()
        monkeypatch.setattr(simulator_faults, "time", clock)  # the token bucket's time.monotonic
        options.update(sleep=clock.sleep, clock=clock.monotonic)
    sim.set_faults(faults)
    # The tables compared below, not the whole tenant: the faults are the client's to absorb and
    # every route goes through it (docs/decisions.md, "Scenario tests load the tables they check").
    result = load(sim, wh, client_options=options, resources=TABLES)
    assert result.exit_code == 0, result.error
    assert result.retries > 0
    if faults[0]["kind"] == "rate_limit":
        assert result.throttled > 0
    sim.clear_faults()
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)


def test_refusals_that_do_not_depend_on_the_pace_cost_only_their_retries(
    wh: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One event-feed request in six refused whatever the pace (a neighbour spending the limit):
    the run completes, the pacer calls those refusals not its own, and the run record and
    `status` say how the run was paced. 1,500 devices: the pacer calls refusals weather only
    after a trial below the pace that first drew them (`http/pacing.py`), a few hundred answers
    in; most of the run comes after that judgement (about 3 in 4 of its 429s, 1 in 2 at 1,000
    devices, 0 to 1 in 4 at 600)."""
    from esper_warehouse.simulator import Simulator

    with Simulator(devices=1500, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        sim.set_faults([{"kind": "status", "status": 429, "route": EVENTS, "probability": 1 / 6}])
        result = load(sim, wh, resources=["device_events"])
        assert result.exit_code == 0, result.error
        assert result.throttled > 50, "the feeds met the neighbour's refusals"
        assert result.not_ours > result.throttled / 3, "most told from its own overshoot"
        assert result.answered == result.requests - result.throttled
        assert result.answered_per_s is not None and result.answered_per_s > 5
        sim.clear_faults()
        with reading(wh):
            compare(sim, wh, "device_events")
    with duckdb.connect(str(wh), read_only=True) as con:
        row = con.execute(
            "select answered, answered_per_s, not_ours, throttled from esper._esper_runs"
        ).fetchone()
    assert row is not None and row[0] == result.answered and row[2] == result.not_ours
    status(wh)
    shown = capsys.readouterr().out
    assert f"429s {result.throttled} ({result.not_ours} not this run's)" in shown, shown
    assert f"answered {result.answered} at " in shown, shown


def test_a_failure_mid_extract_moves_no_cursor_and_the_next_run_completes(
    sim, wh: Path, first_load
) -> None:
    assert first_load(wh).exit_code == 0
    before = cursors(wh)
    loaded = {t: count(wh, t) for t in ("devices", "device_events", "command_statuses")}
    sim.advance(hours=24)
    sim.set_faults([{"kind": "malformed", "route": EVENTS}])  # every event page is broken
    failed = load(sim, wh, client_options={"max_retries": 2}, resources=TABLES)
    assert failed.exit_code == Exit.API
    assert "eventfeed" in failed.error and "JSON" in failed.error.upper()
    assert cursors(wh) == before  # nothing extracted in the failed run is committed
    assert {t: count(wh, t) for t in loaded} == loaded
    assert rows(wh, "_esper_runs", ("status",), "order by started_at") == [("ok",), ("failed",)]
    sim.clear_faults()
    again = load(sim, wh, resources=TABLES)
    assert again.exit_code == 0, again.error
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))


def test_items_inserted_during_offset_paging_are_not_missed(sim) -> None:
    initial = len(sim.truth("devices"))
    sim.set_faults([{"kind": "insert_during_paging", "route": "/v2/devices/", "count": 7,
                     "times": 2}])  # fmt: skip
    with EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID) as client:
        read = read_all(client, "/v2/devices/", limit=25)
    truth = {d["id"] for d in sim.truth("devices")}
    assert len(truth) == initial + 14
    assert {d["id"] for d in read.items} == truth
    assert read.count == len(truth)


class RewriteNext(httpx.HTTPTransport):
    """Loopback transport that points the command list's `next` link at another host."""

    def __init__(self, old: str = "127.0.0.1", new: str = "evil.example") -> None:
        super().__init__()
        self.old, self.new = old, new

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert request.url.host == "127.0.0.1", f"a request left loopback: {request.url.host}"
        response = super().handle_request(request)
        if not request.url.path.endswith("/commands/v0/commands/"):
            return response
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body)
        if envelope.get("next"):
            envelope["next"] = envelope["next"].replace(self.old, self.new)
        return with_body(response, body)


# The command list is the one whose `next` links are rewritten: the runs read it alone (the
# other resources' links are left as they are; a whole run read them in 370 more requests).
COMMANDS_ONLY = {"resources": ["command_requests"], "source_options": {"page_size": 10}}


def test_a_next_link_to_another_origin_is_refused(sim, wh: Path) -> None:
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=RewriteNext())
    result = run(settings(sim, wh, **COMMANDS_ONLY), client=client)
    client.close()
    assert result.exit_code == Exit.CONFIG
    assert "evil.example" in result.error and "refusing to follow" in result.error


@pytest.mark.parametrize(
    ("old", "new"),
    [("http://", "https://"), ("127.0.0.1", "localhost")],
    ids=["another-scheme", "another-host-of-the-service"],
)
def test_next_links_of_the_same_service_are_followed_on_the_configured_origin(
    sim, wh: Path, old: str, new: str
) -> None:
    """Live §12: `next` links saying http://, or another host of the service, are rewritten."""
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=RewriteNext(old, new))
    result = run(settings(sim, wh, **COMMANDS_ONLY), client=client)
    client.close()
    assert result.exit_code == 0, result.error
    with duckdb.connect(str(wh), read_only=True) as con:
        loaded = {r[0] for r in con.sql("select id from esper.command_requests").fetchall()}
    assert loaded == {c["id"] for c in sim.truth("command_requests")}
    assert sim.stats()["routes"]["GET /commands/v0/commands/"] >= 3  # its next links were followed


def test_wrong_enterprise_id_is_a_clear_config_error(sim, wh: Path) -> None:
    wrong = "00000000-0000-4000-8000-000000000000"
    result = load(sim, wh, source_options={"enterprise_id": wrong})
    assert result.exit_code == Exit.CONFIG
    assert "enterprise" in result.error.lower()
    assert sim.stats()["total"] == 2  # the device count, then the tenant check


def test_a_warehouse_named_like_the_dataset_is_refused(sim, tmp_path: Path) -> None:
    result = load(sim, tmp_path / "esper.duckdb")
    assert result.exit_code == Exit.CONFIG
    assert "named like the dataset" in result.error
    assert sim.stats()["total"] == 0


class SilentlyTruncate(httpx.HTTPTransport):
    """Loopback transport that drops the last item of every page of one list, keeping `count`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path != self.path or request.url.params.get("limit") == "1":
            return response
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body) if "results" not in body else body
        envelope["results"] = envelope["results"][:-1]
        return with_body(response, body)


@pytest.mark.parametrize("table", ["groups", "devices"])
def test_a_silently_short_list_fails_the_run_with_exit_4(sim, wh: Path, table: str) -> None:
    path = {
        "groups": f"/api/enterprise/{ENTERPRISE_ID}/devicegroup/",
        "devices": "/api/v2/devices/",
    }
    client = EsperClient(
        sim.base_url, API_KEY, ENTERPRISE_ID, transport=SilentlyTruncate(path[table])
    )
    result = run(settings(sim, wh, resources=[table]), client=client)
    client.close()
    assert result.exit_code == Exit.UNFINISHED, result.error
    assert f"{table} (1 missing)" in result.error
    recon = rows(wh, "_esper_reconciliation", ("table_name", "missing", "ok"), "where not ok")
    assert recon == [(table, 1, False)]
    assert rows(wh, "_esper_runs", ("status",)) == [("reconciliation_failed",)]


class OldestFirstCommands(httpx.HTTPTransport):
    """Loopback transport serving the command list oldest first: the whole list reversed, then
    paged, so the oldest commands fill the first page and the newest come last."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if not request.url.path.endswith("/commands/v0/commands/"):
            return response
        response.read()
        body = orjson.loads(response.content)  # keeps the page's own count, next and prev
        offset = int(request.url.params.get("offset", 0))
        limit = int(request.url.params["limit"])
        whole = request.url.copy_merge_params({"offset": 0, "limit": 10_000})
        everything = super().handle_request(httpx.Request("GET", whole, headers=request.headers))
        everything.read()
        items = orjson.loads(everything.content)["content"]["results"][::-1]
        body["content"]["results"] = items[offset : offset + limit]
        return with_body(response, body)


def test_command_pages_out_of_order_are_read_whole_not_stopped_early(
    sim, wh: Path, first_load: Any
) -> None:
    # A nightly (a read that may stop early) of the command tables alone: the other lists play
    # no part in where a command read stops.
    assert first_load(wh).exit_code == 0
    commands = {"resources": ["command_requests", "command_statuses"]}
    small_pages = {"page_size": 10}  # several pages
    before = {c["id"] for c in sim.truth("command_requests")}
    sim.advance(hours=48)
    new = [c for c in sim.truth("command_requests") if c["id"] not in before]
    assert len(before) >= 10 and new  # old commands fill the first page, new ones come later
    sim.reset_stats()
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=OldestFirstCommands())
    result = run(settings(sim, wh, source_options=small_pages, **commands), client=client)
    client.close()
    assert result.exit_code == 0, result.error
    compare(sim, wh, "command_requests")  # a read that stopped at the first old page lost `new`
    compare(sim, wh, "command_statuses")
    pages = -(-len(sim.truth("command_requests")) // 10)
    assert pages >= 3
    assert sim.stats()["routes"]["GET /commands/v0/commands/"] == 2 * pages  # each page + whole


def test_a_bad_load_memory_limit_is_a_config_error_and_loses_nothing(sim, wh: Path) -> None:
    checked = ["devices", "command_statuses"]  # with the requests (`Table.needs`)
    bad = load(sim, wh, load_memory_limit="lots", resources=checked)
    assert bad.exit_code == Exit.CONFIG
    assert "load_memory_limit 'lots' is not a memory size" in (bad.error or "")
    # a small limit still loads (DuckDB spills), and the pending package of the bad run comes first
    good = load(sim, wh, load_memory_limit="64MB", resources=checked)
    assert good.exit_code == 0, good.error
    compare(sim, wh, "devices")
    compare(sim, wh, "command_statuses")


class RepeatAcrossPages(httpx.HTTPTransport):
    """Loopback transport: each page of the device, command and operation lists starts with the
    previous page's last item, as a list that moves while it is paged serves it."""

    LISTS = ("/v2/devices/", "/commands/v0/commands/", "/v0/operations/")

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, Any] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        path = request.url.path
        if not path.endswith(self.LISTS) or request.url.params.get("limit") == "1":
            return response
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body)
        results = envelope["results"]
        first_page = not (request.url.params.get("offset") or "0").strip("0") and (
            request.url.params.get("cursor") in (None, "start")
        )
        if not first_page and path in self.last:
            envelope["results"] = [self.last[path], *results]
        if results:
            self.last[path] = results[-1]
        return with_body(response, body)


def test_a_first_load_appends_and_keeps_each_key_once(sim, wh: Path, caplog) -> None:
    """A table's first load is an append (nothing to merge with); items a moving list serves
    twice are still loaded once, and the next run merges."""
    small_pages = {"page_size": 10}
    # the paged lists the transport repeats items of, and device_apps (scd2: never appended)
    paged = ["devices", "device_apps", "command_requests", "command_statuses", "operations"]
    transport = RepeatAcrossPages()
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=transport)
    with caplog.at_level("INFO", logger="esper_warehouse"):
        first = run(settings(sim, wh, source_options=small_pages, resources=paged), client=client)
    client.close()
    assert first.exit_code == 0, first.error
    assert len(transport.last) == 3  # every list was paged, so repeats were served
    appended = next(r.getMessage() for r in caplog.records if "first load of" in r.getMessage())
    assert "devices" in appended and "command_requests" in appended
    assert "device_apps" not in appended  # scd2 keeps its merge
    with reading(wh):
        for table in ("devices", "command_requests", "operations", "command_statuses"):
            compare(sim, wh, table)  # equal to the truth: no key twice
    history = rows(wh, "device_history", ("id", "updated_at"))
    assert len(history) == len(set(history)) == len(sim.truth("devices"))

    caplog.clear()
    sim.advance(hours=24)
    with caplog.at_level("INFO", logger="esper_warehouse"):
        nightly = load(sim, wh, source_options=small_pages, resources=paged)
    assert nightly.exit_code == 0, nightly.error
    assert not [r for r in caplog.records if "first load of" in r.getMessage()]
    with reading(wh):
        for table in ("command_requests", "operations", "command_statuses"):
            compare(sim, wh, table)
    compare(sim, wh, "devices", exact=False)


def test_unset_destination_credentials_are_named_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlt nests the lookups of an embedded configuration (a destination's credentials): the
    run's error names the setting instead of failing on the nesting (AttributeError)."""
    import dlt
    from esper_warehouse.pipelines.run.failures import error_text

    for name in [k for k in os.environ if k.startswith("DESTINATION__")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    pipeline = dlt.pipeline("nested", destination="postgres", pipelines_dir=str(tmp_path))
    with pytest.raises(Exception) as raised, pipeline.sql_client():
        pass
    assert error_text(raised.value).startswith("credentials is not set: export it")
