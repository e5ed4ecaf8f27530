"""Data Tap queries end to end against the simulator: typed tables, clear failures."""

from __future__ import annotations

import functools
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from esper_warehouse.pipelines.runner import EXIT_PARTIAL
from esper_warehouse.sources.esper.tables import data_tap as datatap

from tests.pipeline.helpers import ROOT, TABLES, cli, compare, load, reading, rows

QUERY = (  # the live dialect over the live columns (text last_seen and battery_level)
    "select d.device_id, try_cast(s.battery_level as int) as battery_level, d.is_gms, "
    "try_cast(d.last_seen as timestamp) as last_seen, d.report_date "
    "from devices d join device_stats s using (report_date, device_id) "
    "where d.report_date = (select max(report_date) from devices)"
)


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"


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
    assert result.exit_code == EXIT_PARTIAL, result.error
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

    def __init__(self, *polls: dict) -> None:
        self.polls, self.paths = list(polls), []

    def post(self, path: str, json: dict, retry: bool = True) -> dict:
        return {"content": {"id": "job-1", "status": "PENDING", "result": None}}

    def get(self, path: str, params: dict | None = None) -> dict:
        self.paths.append(path)
        return {"content": {"id": "job-1", **self.polls.pop(0)}}


def test_a_closed_job_fails_clearly_and_the_status_path_has_no_trailing_slash():
    from esper_warehouse.sources.esper.tables.data_tap import DataTapError, run_query

    jobs = _Jobs({"status": "RUNNING", "result": None}, {"status": "CLOSED", "result": None})
    with pytest.raises(DataTapError, match="ended CLOSED: the job was closed"):
        run_query(
            jobs, "q", "select 1", deadline_s=60, stuck_s=30, row_limit=10, sleep=lambda s: None
        )
    assert jobs.paths == ["/data-tap/v0/queries/job-1"] * 2


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
    from esper_warehouse.sources.esper.tables.data_tap import result_to_arrow, run_query

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

    from tests.conftest import API_KEY, ENTERPRISE_ID

    sim.world.datatap.quota_per_hour = 0
    sim.reset_stats()
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, backoff_base=0.05)
    with client, pytest.raises(EsperUnavailableError) as e:
        datatap.run_query(
            client, "q", "select 1", deadline_s=60, stuck_s=30, row_limit=10, sleep=_no_wait
        )
    assert "Tenant rate limit exceeded: 0 requests per hour" in str(e.value)
    assert sum(n for route, n in sim.stats()["routes"].items() if route.startswith("POST")) == 1


def test_an_incremental_query_binds_its_cursor_and_keeps_history(sim, wh: Path) -> None:
    spec = {
        "sql": "select device_id, report_date, try_cast(battery_level as int) as battery_level "
        "from device_stats "
        "where report_date > {cursor}",
        "cursor": "report_date",
        "key": ["device_id", "report_date"],
    }
    options = {"data_tap_queries": {"daily": spec}}
    first = load(sim, wh, resources=["data_tap__daily"], source_options=options)
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
    assert submitted and f"DATE'{max(r[1] for r in before).isoformat()}'" in submitted[0]
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
    assert first.exit_code == EXIT_PARTIAL, first.error
    assert set(first.unavailable) == {"data_tap__b"}
    assert "request budget spent (5 per hour)" in first.unavailable["data_tap__b"]
    assert rows(wh, "data_tap__a", ("one",)) == [(1,)]
    assert _data_tap_requests(sim) == 4
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)

    sim.reset_stats()
    second = load(sim, wh, source_options=options, resources=loaded)
    assert second.exit_code == EXIT_PARTIAL, second.error
    assert set(second.unavailable) == {"data_tap__a", "data_tap__b"}
    assert _data_tap_requests(sim) == 0, "the hour's 4 requests are remembered across runs"
    assert rows(wh, "data_tap__a", ("one",)) == [(1,)], "the skipped table keeps its rows"


def test_a_quota_refusal_from_the_cli_is_a_partial_run_with_every_other_table(
    sim, wh: Path
) -> None:
    """The tenant's quota answers 429 without Retry-After: one submission, the message quoted,
    exit 6, every other table loaded and committed, `status` naming the skipped table."""
    sim.world.datatap.quota_per_hour = 0
    sim.reset_stats()
    queries = '{"daily": "select 1 as one", "other": "select 2 as two"}'
    selected = ",".join([*TABLES, "data_tap__daily", "data_tap__other"])  # the compared ones
    proc = cli(
        sim, wh, "run", "--resources", selected, env={"SOURCES__ESPER__DATA_TAP_QUERIES": queries}
    )
    out, err = proc.communicate(timeout=300)
    text = out + err
    assert proc.returncode == EXIT_PARTIAL, text
    assert "Traceback" not in text
    assert "Tenant rate limit exceeded: 0 requests per hour" in text
    assert _data_tap_requests(sim) == 1, "one submission, never re-sent"
    with reading(wh):
        for table in TABLES:
            compare(sim, wh, table)
    shown = subprocess.run(
        [sys.executable, "-m", "esper_warehouse.pipelines.cli", "status", "--warehouse", str(wh)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "data_tap__daily" in shown.stdout and "quota" in shown.stdout
    assert "data_tap__other" in shown.stdout
