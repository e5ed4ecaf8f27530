"""Data Tap queries end to end against the simulator: typed tables, clear failures."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import RunResult
from esper_warehouse.sources.esper.tables import data_tap as datatap

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET, copy_warehouse
from tests.pipeline.helpers import TABLES, cli, compare, load, reading, rows

QUERY = (  # the live dialect over the live columns (text last_seen and battery_level)
    "select d.device_id, try_cast(s.battery_level as int) as battery_level, d.is_gms, "
    "try_cast(d.last_seen as timestamp) as last_seen, d.report_date "
    "from devices d join device_stats s using (report_date, device_id) "
    "where d.report_date = (select max(report_date) from devices)"
)


@pytest.fixture(autouse=True)
def polls_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's jobs move on per status read, not per second: the runs poll without the
    real waits between reads (`run_query`'s injected `sleep`, as its unit tests do)."""
    monkeypatch.setattr(datatap, "run_query", functools.partial(datatap.run_query, sleep=_no_wait))


def _no_wait(seconds: float) -> None:
    """A `sleep` that returns at once."""


def test_a_query_lands_in_its_own_typed_table(sim, wh: Path) -> None:
    result = load(sim, wh, resources=["data_tap__battery"],
                  source_options={"data_tap_queries": {"battery": QUERY}})  # fmt: skip
    assert result.exit_code == 0, result.error
    got = rows(wh, "data_tap__battery", ("device_id", "battery_level", "is_gms", "last_seen"))
    assert len(got) == len({d["id"] for d in sim.truth("devices")})
    typed = [r for r in got if r[1] is not None and r[3] is not None]
    assert typed and isinstance(typed[0][1], int) and isinstance(typed[0][2], bool)
    assert isinstance(typed[0][3], datetime)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # the API's own reason (`content.error_message`) is quoted: DuckDB names the table
        ({"data_tap_queries": {"bad": "select nope from nowhere"}}, "ended FAILED: "),
        # a truncated result skips its table the same way; tests/source/test_units.py reads one
        # (slow tier: docs/decisions.md, "The slow tier")
        pytest.param(
            {"data_tap_queries": {"bad": QUERY}, "data_tap_row_limit": 5},
            "truncated",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_failed_or_truncated_query_skips_its_table_and_the_rest_loads(
    sim, wh: Path, options, message
):
    result = load(sim, wh, source_options=options, resources=[*TABLES, "data_tap__bad"])
    assert result.exit_code == Exit.PARTIAL, result.error
    assert set(result.unavailable) == {"data_tap__bad"}
    why = result.unavailable["data_tap__bad"]
    assert message in why and "'bad'" in why
    if "FAILED" in message:
        assert "nowhere" in why
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)


class _Jobs:
    """A stand-in for the client: the documented answers of a job, one per poll."""

    def __init__(self, *polls: dict, key: str = "") -> None:
        self.polls, self.paths, self.key = list(polls), [], key

    def redact(self, text: str) -> str:
        return text.replace(self.key, "[redacted]") if self.key else text

    def post(self, path: str, json: dict, retry: bool = True) -> dict:
        return {"content": {"id": "job-1", "status": "PENDING", "result": None}}

    def get(self, path: str, params: dict | None = None, retry: bool = True) -> dict:
        assert not retry, "a poll is sent once: the next poll is its retry"
        self.paths.append(path)
        answer = self.polls.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"content": {"id": "job-1", **answer}}


def test_a_failed_poll_is_followed_by_the_next_poll_and_a_refused_one_skips_the_query():
    from esper_warehouse.sources.esper.http import EsperAPIError, EsperNotFoundError
    from esper_warehouse.sources.esper.tables.data_tap_jobs import (
        DataTapError,
        RequestBudget,
        run_query,
    )

    route = "GET /data-tap/v0/queries/{id}"
    budget = RequestBudget(25)
    jobs = _Jobs(
        EsperAPIError("... last: HTTP 502", status=502, route=route),
        EsperAPIError("... last: timeout (ReadTimeout)", status=None, route=route),
        {"status": "SUCCEEDED", "result": None},
    )
    options = {"deadline_s": 60, "stuck_s": 30, "row_limit": 10, "sleep": _no_wait}
    assert run_query(jobs, "q", "select 1", budget=budget, **options)["status"] == "SUCCEEDED"
    assert budget.spent == 4, "a submission and three polls, the failed ones counted"
    gone = _Jobs(EsperNotFoundError("... answered 404", route=route))
    with pytest.raises(DataTapError, match="polling its job failed"):
        run_query(gone, "q", "select 1", **options)
    assert len(gone.paths) == 1, "a refused poll is not asked again"


def test_a_closed_job_fails_clearly_and_the_status_path_has_no_trailing_slash():
    from esper_warehouse.sources.esper.tables.data_tap_jobs import DataTapError, run_query

    jobs = _Jobs({"status": "RUNNING", "result": None}, {"status": "CLOSED", "result": None})
    with pytest.raises(DataTapError, match="ended CLOSED: the job was closed"):
        run_query(
            jobs, "q", "select 1", deadline_s=60, stuck_s=30, row_limit=10, sleep=lambda s: None
        )
    assert jobs.paths == ["/data-tap/v0/queries/job-1"] * 2


@pytest.mark.parametrize("cut", [0, 280, 295, 299])
def test_a_failed_jobs_message_is_quoted_without_the_key_wherever_it_is_cut(cut: int) -> None:
    from esper_warehouse.sources.esper.tables.data_tap_jobs import DataTapError, run_query

    key = "k3y-0123456789abcdefghijklmnopqrstuvwxyz"  # 40 characters
    message = "x" * cut + key + " was refused"  # the key across the 300-character cut
    jobs = _Jobs({"status": "FAILED", "error_message": message}, key=key)
    with pytest.raises(DataTapError, match="ended FAILED") as failed:
        run_query(
            jobs, "q", "select 1", deadline_s=60, stuck_s=30, row_limit=10, sleep=lambda s: None
        )
    text = str(failed.value)
    assert not any(key[i : i + 8] in text for i in range(len(key) - 7)), text


class _Quota:
    """A stand-in for the client whose Data Tap submissions the tenant's quota refuses."""

    MESSAGE = "Tenant rate limit exceeded: 25 requests per hour"

    def __init__(self) -> None:
        self.posts: list[bool] = []

    def post(self, path: str, json: dict, retry: bool = True) -> dict:
        from esper_warehouse.sources.esper.http import EsperAPIError

        self.posts.append(retry)
        raise EsperAPIError(
            f"POST /data-tap/v0/queries failed after 1 attempts; last: HTTP 429: {self.MESSAGE}",
            status=429,
            route="POST /data-tap/v0/queries",
        )


def test_a_quota_refusal_is_submitted_once_quoted_and_ends_data_tap_for_the_run():
    from esper_warehouse.sources.esper.http import EsperUnavailableError
    from esper_warehouse.sources.esper.tables.data_tap import data_tap_resources

    client = _Quota()
    options = {"deadline_s": 60, "stuck_s": 30, "row_limit": 10, "sleep": lambda s: None}
    first, second = data_tap_resources(client, {"a": "select 1", "b": "select 2"}, **options)
    with pytest.raises(Exception) as caught:
        list(first)
    error = caught.value
    while not isinstance(error, EsperUnavailableError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, EsperUnavailableError)
    assert error.table == "data_tap__a" and error.status == 429
    assert _Quota.MESSAGE in str(error)
    assert client.posts == [False]  # one submission, and the client told not to retry it
    with pytest.raises(Exception, match="not submitted"):
        list(second)
    assert client.posts == [False]  # the later query is not submitted


def test_a_succeeded_job_without_result_is_zero_rows_and_polls_wait_10_20_30_s():
    from esper_warehouse.sources.esper.tables.data_tap_jobs import result_to_arrow, run_query

    waits: list[float] = []
    jobs = _Jobs(
        {"status": "RUNNING", "result": None},
        {"status": "RUNNING", "result": None},
        {"status": "RUNNING", "result": None},
        {"status": "SUCCEEDED", "result": None},
    )
    job = run_query(
        jobs, "q", "select 1", deadline_s=600, stuck_s=300, row_limit=10, sleep=waits.append
    )
    assert result_to_arrow("q", job).num_rows == 0
    assert waits == [10.0, 20.0, 30.0, 30.0]


def test_a_quota_refusal_on_the_simulator_costs_exactly_one_post(sim) -> None:
    from esper_warehouse.sources.esper.http import EsperClient, EsperUnavailableError

    sim.world.datatap.quota_per_hour = 0
    sim.reset_stats()
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, backoff_base=0.05)
    with client, pytest.raises(EsperUnavailableError) as e:
        datatap.run_query(
            client, "q", "select 1", deadline_s=60, stuck_s=30, row_limit=10, sleep=_no_wait
        )
    assert "Tenant rate limit exceeded: 0 requests per hour" in str(e.value)
    assert sum(n for route, n in sim.stats()["routes"].items() if route.startswith("POST")) == 1


DAILY = {
    "sql": "select device_id, report_date, try_cast(battery_level as int) as battery_level "
    "from device_stats where report_date > {cursor}",
    "cursor": "report_date",
    "key": ["device_id", "report_date"],
}
DAILY_KEY = ("device_id", "report_date")


@pytest.fixture(scope="module")
def daily_load(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """A first load of the `daily` query alone (DAILY) of a fresh simulator, once for the module:
    the warehouse and the run's result. The tests that start so copy it beside their own fresh
    `sim`, which serves what this one served (`shared_first_load` in tests/conftest.py says why)."""
    from esper_warehouse.simulator import Simulator

    wh = tmp_path_factory.mktemp("daily") / "warehouse.duckdb"
    with (
        pytest.MonkeyPatch.context() as patch,
        Simulator(
            devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID
        ) as twin,
    ):
        patch.setattr(datatap, "run_query", functools.partial(datatap.run_query, sleep=_no_wait))
        result = load(twin, wh, resources=["data_tap__daily"],
                      source_options={"data_tap_queries": {"daily": DAILY}})  # fmt: skip
    return wh, result


@pytest.fixture
def daily_first_load(sim, daily_load: tuple[Path, RunResult]) -> Callable[[Path], RunResult]:
    """`daily_first_load(wh)` stands for a test's opening
    `load(sim, wh, resources=["data_tap__daily"], source_options={"data_tap_queries": {"daily":
    DAILY}})` on its fresh `sim`: a copy of `daily_load` (as `first_load` copies the full one)."""
    assert sim.now == daily_load[1].as_of and sim.stats()["total"] == 0

    def copy_to(wh: Path) -> RunResult:
        copy_warehouse(daily_load[0], wh)
        return copy.deepcopy(daily_load[1])

    return copy_to


def test_an_incremental_query_binds_its_cursor_and_keeps_history(
    sim, wh: Path, daily_first_load
) -> None:
    options = {"data_tap_queries": {"daily": DAILY}}
    first = daily_first_load(wh)
    assert first.exit_code == 0, first.error
    before = rows(wh, "data_tap__daily", ("device_id", "report_date"))
    assert len({r[1] for r in before}) > 1  # several days of history
    submitted: list[str] = []
    real = datatap.run_query
    datatap.run_query = lambda c, n, sql, **o: submitted.append(sql) or real(c, n, sql, **o)
    try:
        second = load(sim, wh, resources=["data_tap__daily"], source_options=options)
    finally:
        datatap.run_query = real
    assert second.exit_code == 0, second.error
    # the newest day loaded, one day back (the default lag_days: the newest day was partial)
    bound = max(r[1] for r in before) - timedelta(days=1)
    assert submitted and f"DATE'{bound.isoformat()}'" in submitted[0]
    assert set(before) <= set(rows(wh, "data_tap__daily", ("device_id", "report_date")))


def _data_tap_requests(sim) -> int:
    return sum(n for route, n in sim.stats()["routes"].items() if "/data-tap/" in route)


def test_the_request_budget_holds_within_a_run_and_across_runs(sim, wh: Path) -> None:
    """Each simulator job costs a submission and three polls (PENDING, RUNNING, SUCCEEDED): a
    budget of 5 affords one query; the next is skipped unsent, and a run right after sends none."""
    options = {
        "data_tap_queries": {"a": "select 1 as one", "b": "select 2 as two"},
        "data_tap_requests_per_hour": 5,
        "data_tap_poll_s": "0",
    }
    sim.reset_stats()
    loaded = [*TABLES, "data_tap__a", "data_tap__b"]
    first = load(sim, wh, source_options=options, resources=loaded)
    assert first.exit_code == Exit.PARTIAL, first.error
    assert set(first.unavailable) == {"data_tap__b"}
    assert "request budget spent (5 per hour)" in first.unavailable["data_tap__b"]
    assert rows(wh, "data_tap__a", ("one",)) == [(1,)]
    assert _data_tap_requests(sim) == 4
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)

    sim.reset_stats()
    # the Data Tap tables only, all this run is asserted on (the hour's requests are kept
    # beside the warehouse, whatever a run loads: `request_log`)
    second = load(sim, wh, source_options=options, resources=["data_tap__a", "data_tap__b"])
    assert second.exit_code == Exit.PARTIAL, second.error
    assert set(second.unavailable) == {"data_tap__a", "data_tap__b"}
    assert _data_tap_requests(sim) == 0, "the hour's 4 requests are remembered across runs"
    assert rows(wh, "data_tap__a", ("one",)) == [(1,)], "the skipped table keeps its rows"


def test_a_quota_refusal_from_the_cli_is_a_partial_run_with_every_other_table(
    sim, wh: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tenant's quota answers 429 without Retry-After: one submission, the message quoted,
    exit 6, every other table loaded and committed, `status` naming the skipped table (the
    command's entry point in this process: tests/pipeline/test_inputs.py runs it as a program)."""
    from esper_warehouse.pipelines import cli as commands

    sim.world.datatap.quota_per_hour = 0
    sim.reset_stats()
    queries = '{"daily": "select 1 as one", "other": "select 2 as two"}'
    selected = ",".join([*TABLES, "data_tap__daily", "data_tap__other"])  # the compared ones
    proc = cli(
        sim, wh, "run", "--resources", selected, env={"SOURCES__ESPER__DATA_TAP_QUERIES": queries}
    )
    out, err = proc.communicate(timeout=300)
    text = out + err
    assert proc.returncode == Exit.PARTIAL, text
    assert "Traceback" not in text
    assert "Tenant rate limit exceeded: 0 requests per hour" in text
    assert _data_tap_requests(sim) == 1, "one submission, never re-sent"
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)
    capsys.readouterr()
    assert commands.main(["status", "--warehouse", str(wh)]) == 0
    shown = capsys.readouterr().out
    assert "data_tap__daily" in shown and "quota" in shown
    assert "data_tap__other" in shown


# -- a failed night, and the nights after it (issue 32, item 1) --------------------------------


def _appended_note(wh: Path) -> Path:
    from esper_warehouse.pipelines.run.dispositions import appended_marker

    from tests.pipeline.helpers import settings

    return appended_marker(settings(_NoSim(), wh))


class _NoSim:
    base_url = "http://127.0.0.1:9"


def test_a_night_that_failed_on_a_new_data_tap_table_does_not_break_the_next(sim, wh: Path) -> None:
    """A first load of a new incremental query notes its table as appended; the run then fails
    (here: the heartbeat list answers 500 until its retries run out). The next run finds the note
    naming a table no declaration lists, and must recover by itself: exit 0, rows loaded, the
    note cleared, and so the night after."""
    options = {"data_tap_queries": {"daily": DAILY}}
    selected = ["heartbeats", "data_tap__daily"]
    sim.set_faults([{"kind": "status", "status": 500, "route": "/v2/heartbeat/*"}])
    failed = load(sim, wh, resources=selected, source_options=options)
    assert failed.exit_code == 3, failed.error
    assert "data_tap__daily" in _appended_note(wh).read_text()
    sim.set_faults([])
    for night in range(2):
        result = load(sim, wh, resources=selected, source_options=options)
        assert result.exit_code == 0, (night, result.error)
        assert not _appended_note(wh).exists()
    got = rows(wh, "data_tap__daily", DAILY_KEY)
    assert got and len(got) == len(set(got))


@pytest.mark.parametrize("note", ["named", "unreadable"])
def test_a_killed_append_into_a_data_tap_table_keeps_one_row_per_key(
    sim, wh: Path, daily_first_load, note: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a run killed mid-load leaves: rows appended twice and the note naming the table (or
    a note cut short, which stands for every table). The next run keeps one row per key of the
    Data Tap table, with the key dlt merges it on, and says so."""
    import duckdb

    options = {"data_tap_queries": {"daily": DAILY}}
    assert daily_first_load(wh).exit_code == 0
    before = rows(wh, "data_tap__daily", DAILY_KEY)
    with duckdb.connect(str(wh)) as con:  # a load job committed twice
        con.execute("insert into esper.data_tap__daily select * from esper.data_tap__daily")
    _appended_note(wh).write_text('["data_tap__daily"]' if note == "named" else '["data_t')
    result = load(sim, wh, resources=["data_tap__daily"], source_options=options)
    assert result.exit_code == 0, result.error
    after = rows(wh, "data_tap__daily", DAILY_KEY)
    assert len(after) == len(set(after)) and set(before) <= set(after)
    assert any(
        "data_tap__daily held" in r.getMessage() and "kept one per key" in r.getMessage()
        for r in caplog.records
    )
    checked = {r["table_name"]: r for r in result.reconciliation}
    assert checked["data_tap__daily"]["ok"] and checked["data_tap__daily"]["duplicates"] == 0


# -- Data Tap keeps its quota promises (issue 32, item 7) --------------------------------------

TWO = {"data_tap_queries": {"a": "select 1 as one", "b": "select 2 as two"}, "data_tap_poll_s": "0"}


def _posts(sim) -> int:
    return sum(n for r, n in sim.stats()["routes"].items() if r.startswith("POST /data-tap/"))


@pytest.mark.parametrize(
    ("fault", "said", "timeout"),
    [
        ({"kind": "status", "status": 500}, "HTTP 500", None),
        # A short read timeout for the slowed submission only, with room for the next query's
        # answers on a busy machine.
        ({"kind": "slow", "seconds": 6}, "timeout", 3.0),
        ({"kind": "drop"}, "connection failed", None),
    ],
)
def test_a_submission_that_fails_skips_its_query_only_and_is_never_sent_again(
    sim, wh: Path, fault: dict, said: str, timeout: float | None
) -> None:
    """The first query's POST answers 500, times out or is cut: that query is skipped (exit 6,
    named with the cause), not re-sent, and the night goes on: the next query is submitted and
    loaded, and so is every other table."""
    sim.set_faults([{**fault, "route": "/data-tap/v0/queries", "times": 1}])
    sim.reset_stats()
    result = load(
        sim, wh, resources=["groups", "data_tap__a", "data_tap__b"], source_options=TWO,
        client_options={"timeout": timeout} if timeout else None,
    )  # fmt: skip
    assert result.exit_code == Exit.PARTIAL, result.error
    assert set(result.unavailable) == {"data_tap__a"}
    why = result.unavailable["data_tap__a"]
    assert "submission failed" in why and said in why and "not re-sent" in why
    deadline = time.monotonic() + 10  # a slowed submission is counted once it is answered
    while _posts(sim) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _posts(sim) == 2, "one submission per query: the failed one is not re-sent"
    assert rows(wh, "data_tap__b", ("two",)) == [(2,)]
    assert len(rows(wh, "groups", ("id",))) == len(sim.truth("groups"))


def test_a_quota_refusal_on_a_poll_ends_data_tap_for_the_run_at_once(sim, wh: Path) -> None:
    """The quota lets the submission through and refuses the first poll (429 without
    Retry-After, as live): that poll is not retried, no later query is sent, the run is partial
    with every other table loaded, in two Data Tap requests and no wait."""
    sim.world.datatap.quota_per_hour = 1
    sim.reset_stats()
    started = time.monotonic()
    result = load(sim, wh, resources=["groups", "data_tap__a", "data_tap__b"], source_options=TWO)
    assert result.exit_code == Exit.PARTIAL, result.error
    assert set(result.unavailable) == {"data_tap__a", "data_tap__b"}
    assert "Tenant rate limit exceeded: 1 requests per hour" in result.unavailable["data_tap__a"]
    assert "not submitted" in result.unavailable["data_tap__b"]
    assert _data_tap_requests(sim) == 2, sim.stats()["routes"]
    assert time.monotonic() - started < 30
    assert len(rows(wh, "groups", ("id",))) == len(sim.truth("groups"))


def test_requests_of_a_killed_run_count_against_the_next_runs_budget(sim, wh: Path) -> None:
    """A run killed while it polls a long job has sent requests the quota counted: the next run
    counts them too. Budget 4: the killed run sent 3, so the next can afford no query (a
    submission needs a poll left) and sends nothing."""
    sim.world.datatap.job_seconds = 120  # the job runs: the killed run polls it
    env = {
        "SOURCES__ESPER__DATA_TAP_QUERIES": '{"a": "select 1 as one"}',
        "SOURCES__ESPER__DATA_TAP_POLL_S": "0.2,0.2",  # (one value: issue 32 item 14)
        "SOURCES__ESPER__DATA_TAP_REQUESTS_PER_HOUR": "4",
    }
    sim.reset_stats()
    proc = cli(sim, wh, "run", "--resources", "data_tap__a", env=env)
    deadline = time.monotonic() + 120
    while _data_tap_requests(sim) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.kill()  # SIGKILL: nothing of the run is committed
    out, err = proc.communicate(timeout=30)
    assert _data_tap_requests(sim) >= 3, out + err

    sim.reset_stats()
    options = {**TWO, "data_tap_queries": {"a": "select 1 as one"}, "data_tap_requests_per_hour": 4}
    result = load(sim, wh, resources=["data_tap__a"], source_options=options)
    assert result.exit_code == Exit.PARTIAL, result.error
    assert "request budget spent (4 per hour)" in result.unavailable["data_tap__a"]
    assert _data_tap_requests(sim) == 0, "the killed run's requests are counted"


# -- incremental edges (issue 32, item 8) ------------------------------------------------------


def _submitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every Data Tap submission from now on."""
    sent: list[str] = []
    real = datatap.run_query
    monkeypatch.setattr(
        datatap, "run_query", lambda c, n, sql, **o: sent.append(sql) or real(c, n, sql, **o)
    )
    return sent


@pytest.mark.parametrize(
    ("spec", "later"),
    [
        (  # a number: bound as it is, no lag (start: the first run's value)
            {
                "sql": "select device_id, datediff(report_date, date'1970-01-01') as day_no "
                "from device_stats where datediff(report_date, date'1970-01-01') > {cursor}",
                "cursor": "day_no",
                "key": ["device_id", "day_no"],
                "start": 0,
            },
            lambda newest: f"> {newest}",
        ),
        (  # a timestamp: bound as a TIMESTAMP literal, one day back (the default lag)
            {
                "sql": "select device_id, report_generation_timestamp as generated from devices "
                "where report_generation_timestamp > {cursor}",
                "cursor": "generated",
                "key": ["device_id", "generated"],
            },
            lambda newest: (
                f"> TIMESTAMP'{newest - timedelta(days=1):%Y-%m-%d %H:%M:%S}.000000+00:00'"
            ),
        ),
    ],
    ids=["number", "timestamp"],
)
def test_a_cursor_of_any_sortable_type_binds_as_its_type(
    sim, wh: Path, monkeypatch: pytest.MonkeyPatch, spec: dict, later
) -> None:
    options = {"data_tap_queries": {"q": spec}}
    first = load(sim, wh, resources=["data_tap__q"], source_options=options)
    assert first.exit_code == 0, first.error
    before = rows(wh, "data_tap__q", tuple(spec["key"]))
    assert before
    sent = _submitted(monkeypatch)
    second = load(sim, wh, resources=["data_tap__q"], source_options=options)
    assert second.exit_code == 0, second.error
    assert later(max(r[1] for r in before)) in sent[0], sent
    after = rows(wh, "data_tap__q", tuple(spec["key"]))
    assert set(before) <= set(after) and len(after) == len(set(after))


class _Answer:
    """A stand-in for the client: the submission answers a finished job with `result`."""

    def __init__(self, columns: list[tuple[str, str]], data: list[list]) -> None:
        self.result = {
            "schema": {
                "column_count": len(columns),
                "columns": [
                    {"name": n, "position": i, "type_name": t, "type_text": t.lower()}
                    for i, (n, t) in enumerate(columns)
                ],
            },
            "data_array": data,
            "truncated": False,
        }

    def post(self, path: str, json: dict, retry: bool = True) -> dict:
        return {"content": {"id": "job-1", "status": "SUCCEEDED", "result": self.result}}


INCREMENTAL = {"sql": "select * from t where event_id > {cursor}", "cursor": "event_id",
               "key": ["device_id", "event_id"], "start": 0}  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "data", "named"),
    [
        ([("device_id", "STRING"), ("n", "INT")], [["d1", "1"]], "no column 'event_id' (its cursor)"),
        ([("event_id", "BIGINT")], [["1"]], "no column 'device_id' (its key)"),
        ([("device_id", "STRING"), ("event_id", "BIGINT")], [[None, "1"], ["d2", "2"]],
         "1 row(s) with NULL in 'device_id' (its key)"),
        ([("device_id", "STRING"), ("event_id", "BIGINT")], [["d1", None]],
         "1 row(s) with NULL in 'event_id' (its cursor)"),
        ([("device_id", "STRING"), ("event_id", "BIGINT"), ("battery", "INT")],
         [["d1", "1", "n/a"], ["d2", "2", "40"], ["d3", "3", "?"]],
         "battery (INT): 2 cell(s), e.g. 'n/a'"),
        ([("device_id", "STRING"), ("event_id", "BIGINT"), ("day", "DATE")],
         [["d1", "1", "2026-02-30"]], "day (DATE): 1 cell(s), e.g. '2026-02-30'"),
        ([("device_id", "STRING"), ("event_id", "BIGINT"), ("ok", "BOOLEAN")],
         [["d1", "1", "maybe"]], "ok (BOOLEAN): 1 cell(s), e.g. 'maybe'"),
    ],
    ids=["no-cursor", "no-key", "null-key", "null-cursor", "text-in-int", "bad-date", "bad-bool"],
)  # fmt: skip
def test_a_result_that_cannot_be_loaded_skips_its_table_named(columns, data, named) -> None:
    """Loaded as it is, such a result would end the night (KeyError, ArrowInvalid, a cast
    error) or be kept wrong (a NULL key, "maybe" as false): its table is skipped for the run
    instead, the column and the problem named (the run is partial, exit 6)."""
    from esper_warehouse.sources.esper.run.ledger import RunLedger
    from esper_warehouse.sources.esper.tables.data_tap import data_tap_resources

    ledger = RunLedger()
    options = {"deadline_s": 60, "stuck_s": 30, "row_limit": 10, "sleep": _no_wait}
    (resource,) = data_tap_resources(
        _Answer(columns, data), {"q": INCREMENTAL}, ledger=ledger, **options
    )
    assert list(resource) == []
    why = ledger.refusals.why("data_tap__q")
    assert why is not None
    assert named in why and "'q'" in why and "nothing of the result was loaded" in why


def test_a_null_key_from_the_api_is_a_partial_run_with_the_rest_loaded(sim, wh: Path) -> None:
    spec = {
        **DAILY,
        "sql": DAILY["sql"].replace("select device_id", "select cast(null as string) as device_id"),
    }
    result = load(
        sim, wh, resources=["groups", "data_tap__daily"],
        source_options={"data_tap_queries": {"daily": spec}},
    )  # fmt: skip
    assert result.exit_code == Exit.PARTIAL, result.error
    assert "with NULL in 'device_id' (its key)" in result.unavailable["data_tap__daily"]
    assert len(rows(wh, "groups", ("id",))) == len(sim.truth("groups"))


def _ask(sim, sql: str) -> list[tuple]:
    """What Data Tap answers `sql` now (through the client, as a run reads it)."""
    from esper_warehouse.sources.esper.http import EsperClient

    with EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID) as client:
        job = datatap.run_query(
            client, "ask", sql, deadline_s=60, stuck_s=60, row_limit=100_000, sleep=_no_wait
        )
    return [tuple(r.values()) for r in datatap.result_to_arrow("ask", job).to_pylist()]


def _warned(caplog: pytest.LogCaptureFixture, *words: str) -> bool:
    return any(all(w in r.getMessage() for w in words) for r in caplog.records)


def test_a_changed_key_starts_the_table_afresh_and_says_so(
    sim, wh: Path, daily_first_load, caplog: pytest.LogCaptureFixture
) -> None:
    """Merging on a new key over rows kept on the old one mixes two tables; the table is replaced
    by the new query's whole result, and the log says so (never a silent loss)."""
    first = daily_first_load(wh)
    assert first.exit_code == 0, first.error
    per_device = {**DAILY, "key": ["device_id"]}
    caplog.clear()
    second = load(sim, wh, resources=["data_tap__daily"],
                  source_options={"data_tap_queries": {"daily": per_device}})  # fmt: skip
    assert second.exit_code == 0, second.error
    assert _warned(caplog, "'daily' changed its key (device_id, report_date -> device_id)",
                   "data_tap__daily starts afresh")  # fmt: skip
    got = rows(wh, "data_tap__daily", ("device_id", "report_date"))
    newest = _ask(sim, "select device_id, max(report_date) from device_stats group by device_id")
    assert sorted(got) == sorted(newest), "one row per device, its newest day: the new key"


def test_a_changed_query_text_starts_its_cursor_over_and_keeps_the_earlier_rows(
    sim, wh: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first query reads only the newest day; the widened one must read the older days it
    now covers (the old cursor would skip them), keep what was loaded, and say so."""
    narrow = {
        **DAILY,
        "sql": DAILY["sql"] + " and report_date >= (select max(report_date) from device_stats)",
    }
    first = load(sim, wh, resources=["data_tap__daily"],
                 source_options={"data_tap_queries": {"daily": narrow}})  # fmt: skip
    assert first.exit_code == 0, first.error
    before = rows(wh, "data_tap__daily", DAILY_KEY)
    assert len({r[1] for r in before}) == 1
    caplog.clear()
    second = load(sim, wh, resources=["data_tap__daily"],
                  source_options={"data_tap_queries": {"daily": DAILY}})  # fmt: skip
    assert second.exit_code == 0, second.error
    assert _warned(caplog, "'daily' changed its SQL", "cursor starts over")
    after = rows(wh, "data_tap__daily", DAILY_KEY)
    assert set(before) <= set(after)
    assert len({r[1] for r in after}) > 1, "the older days the wider query covers are loaded"


def test_one_key_twice_in_a_result_keeps_the_newest_row_on_every_load(
    sim, wh: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Per device: several days, each twice (the same cursor). The newest day wins; of its two
    rows, the later in the result. The first load (an append) and the next (a merge) agree."""
    copy = "select device_id, report_date, '{0}' as copy from device_stats where report_date > {{cursor}}"
    spec = {"sql": f"{copy.format('first')} union all {copy.format('second')}",
            "cursor": "report_date", "key": ["device_id"]}  # fmt: skip
    options = {"data_tap_queries": {"latest": spec}}
    newest = _ask(sim, "select device_id, max(report_date), 'second' from device_stats group by 1")
    for night in range(2):
        result = load(sim, wh, resources=["data_tap__latest"], source_options=options)
        assert result.exit_code == 0, (night, result.error)
        got = rows(wh, "data_tap__latest", ("device_id", "report_date", "copy"))
        assert sorted(got) == sorted(newest), night
    assert _warned(
        caplog, "row(s) repeat the key (device_id)", "kept the row with the newest report_date"
    )


def test_the_default_lag_reads_the_partial_newest_day_again_once_it_is_complete(
    sim, wh: Path
) -> None:
    """Data Tap's newest day (`latest_data`) is read while it is still going on. The next
    night, with the default lag, holds that day as Data Tap finally has it, late rows included."""
    from tests.pipeline.helpers import _value

    spec = {"sql": "select device_id, report_date, last_seen from devices where report_date > {cursor}",
            "cursor": "report_date", "key": ["device_id", "report_date"]}  # fmt: skip
    options = {"data_tap_queries": {"seen": spec}}
    assert load(sim, wh, resources=["data_tap__seen"], source_options=options).exit_code == 0
    partial_day = max(r[1] for r in rows(wh, "data_tap__seen", ("device_id", "report_date")))
    sim.advance(24)
    assert load(sim, wh, resources=["data_tap__seen"], source_options=options).exit_code == 0
    day = (
        f"select device_id, report_date, last_seen from devices where report_date = '{partial_day}'"
    )
    final = {tuple(_value(v) for v in r) for r in _ask(sim, day)}
    got = rows(wh, "data_tap__seen", ("device_id", "report_date", "last_seen"))
    assert final and {r for r in got if r[1] == partial_day} == final


@pytest.mark.parametrize(
    ("stored", "literal"),
    [
        ({"value": 102, "type": "number"}, "102"),
        ({"value": 2.5, "type": "number"}, "2.5"),
        ({"value": "2026-11-20", "type": "date"}, "DATE'2026-11-19'"),
        ({"value": "2026-11-20T10:00:00+02:00", "type": "timestamp"},
         "TIMESTAMP'2026-11-19 08:00:00.000000+00:00'"),
        ({"value": "2026-11-20T10:00:00", "type": "timestamp"}, "TIMESTAMP'2026-11-19 10:00:00.000000'"),
        ({"value": "it's a\\b", "type": "text"}, "'it\\'s a\\\\b'"),
        ("2026-11-20", "DATE'2026-11-19'"),  # a cursor stored before cursors had types: a date
        (None, "0"),  # the first run: `start`
    ],
)  # fmt: skip
def test_a_stored_cursor_binds_as_a_literal_of_its_type(stored, literal) -> None:
    from esper_warehouse.sources.esper.tables.data_tap import Incremental

    query = Incremental.of(
        "q", {"sql": "select * from t where c > {cursor}", "cursor": "c", "start": 0}
    )
    assert query.bind(stored) == f"select * from t where c > {literal}"
