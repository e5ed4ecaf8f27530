"""Data Tap: real SQL over the daily snapshots, typed results, failures and truncation.

The shape is Esper's Query API documentation (live-shapes.json `docs_only`; no live sample).
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from esper_warehouse.pipelines.shapes import shape_of

from tests.live_shapes import document

DOCUMENTED = document()["docs_only"][0]["routes"]
STATUS_SHAPE = next(r for r in DOCUMENTED if r["method"] == "GET")["response_shape"]["content"]


def _run(client, body: dict) -> dict:
    created = client.post("/data-tap/v0/queries", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["content"]["status"] == "PENDING"
    job = created.json()["content"]["id"]
    statuses = []
    while True:
        content = client.get(f"/data-tap/v0/queries/{job}").json()["content"]
        statuses.append(content["status"])
        if content["status"] in ("SUCCEEDED", "FAILED"):
            assert statuses[:2] == ["PENDING", "RUNNING"]
            assert set(content) == set(STATUS_SHAPE), "the documented keys, no others"
            return content
        assert len(statuses) < 5


def test_query_returns_typed_rows(client):
    """Live §15: typed columns (`name`, `position`, `type_name`), cells as strings, `truncated`,
    `error_message` null; §19: the tables are daily snapshots, the newest of the API's day."""
    sql = """
        select d.platform, count(*) as devices, avg(try_cast(s.battery_level as int)) as avg_battery,
               max(d.report_date) as day
        from devices d join device_stats s using (report_date, device_id)
        where d.report_date = (select max(report_date) from devices)
        group by d.platform order by d.platform
    """
    content = _run(client, {"query": sql, "latest_data": True})
    result = content["result"]
    cols = result["schema"]["columns"]
    assert [(c["name"], c["position"], c["type_name"]) for c in cols] == [
        ("platform", 0, "STRING"),
        ("devices", 1, "LONG"),
        ("avg_battery", 2, "DOUBLE"),
        ("day", 3, "DATE"),
    ]
    assert result["schema"]["column_count"] == 4
    assert shape_of(result["data_array"]) == [["str"]], "live §15: cells are strings"
    assert result["data_array"] and all(int(r[1]) > 0 for r in result["data_array"])
    today = parsedate_to_datetime(client.get("/v2/devices/?limit=1").headers["date"]).date()
    assert {r[3] for r in result["data_array"]} == {today.isoformat()}, "§19: daily snapshots"
    assert result["truncated"] is False
    assert content["error_message"] is None


def test_snapshots_are_daily_and_joinable(client):
    content = _run(
        client,
        {
            "query": "select d.report_date, count(distinct a.package_name) as apps, count(*) as rows "
            "from devices d join device_apps a using (report_date, device_id) "
            "join device_stats s using (report_date, device_id) join groups g "
            "on g.report_date = d.report_date and g.group_id = d.group_id "
            "group by 1 order by 1"
        },
    )
    days = [r[0] for r in content["result"]["data_array"]]
    assert len(days) >= 7 and days == sorted(days)


def test_bad_sql_fails_with_a_message(client):
    content = _run(client, {"query": "select nope from devices"})
    assert content["status"] == "FAILED"
    assert "nope" in content["error_message"] and content["result"] is None
    content = _run(client, {"query": "drop table devices"})
    assert content["status"] == "FAILED"


def test_row_limit_sets_truncated(client):
    content = _run(client, {"query": "select device_id from devices", "row_limit": 5})
    result = content["result"]
    assert len(result["data_array"]) == 5 and result["truncated"] is True


def test_a_finished_job_closes_and_the_status_path_has_no_trailing_slash(client):
    created = client.post("/data-tap/v0/queries", json={"query": "select 1 as one"})
    job = created.json()["content"]["id"]
    assert client.get(f"/data-tap/v0/queries/{job}/").status_code == 404
    statuses = [client.get(f"/data-tap/v0/queries/{job}").json()["content"]["status"]]
    while statuses[-1] != "CLOSED":
        statuses.append(client.get(f"/data-tap/v0/queries/{job}").json()["content"]["status"])
        assert len(statuses) < 12
    assert statuses[:3] == ["PENDING", "RUNNING", "SUCCEEDED"]


def test_bad_request_and_auth(client, shared_sim):
    bad = client.post("/data-tap/v0/queries", json={"row_limit": 3})
    assert bad.status_code == 400
    assert set(bad.json()) == {"status", "error", "message"}
    from tests.simulator.conftest import make_client

    with make_client(shared_sim, "wrong") as c:
        resp = c.post("/data-tap/v0/queries", json={"query": "select 1"})
    assert resp.status_code == 401 and resp.json()["status"] == 401


def test_a_canceled_query_says_canceled(sim):
    """The documented CANCELED status (live §15), produced by the `query_canceled` fault."""
    from tests.simulator.conftest import make_client

    with make_client(sim) as c:
        job = c.post("/data-tap/v0/queries", json={"query": "select 1 as one"}).json()
        job_id = job["content"]["id"]
        assert c.get(f"/data-tap/v0/queries/{job_id}").json()["content"]["status"] == "PENDING"
        sim.set_faults([{"kind": "query_canceled", "route": "/data-tap/v0/queries/*", "times": 1}])
        content = c.get(f"/data-tap/v0/queries/{job_id}").json()["content"]
        assert (content["status"], content["result"], content["error_message"]) == (
            "CANCELED",
            None,
            None,
        )
        assert set(content) == set(STATUS_SHAPE)
        again = c.get(f"/data-tap/v0/queries/{job_id}").json()["content"]
        assert again["status"] == "CANCELED", "a canceled query stays canceled"
        other = c.post("/data-tap/v0/queries", json={"query": "select 1 as one"}).json()
        polls = [
            c.get(f"/data-tap/v0/queries/{other['content']['id']}").json()["content"]["status"]
            for _ in range(3)
        ]
        assert polls == ["PENDING", "RUNNING", "SUCCEEDED"], "the fault fired once"


def test_a_submission_is_accepted_with_a_trailing_slash_as_live(client):
    created = client.post("/data-tap/v0/queries/", json={"query": "select 1 as one"})
    assert created.status_code in (200, 201), created.text
    assert created.json()["content"]["id"]


def test_the_data_tap_quota_refuses_as_live_without_retry_after(client, shared_sim):
    shared_sim.world.datatap.quota_per_hour = 2
    try:
        assert client.post("/data-tap/v0/queries", json={"query": "select 1 as one"}).is_success
        job = client.post("/data-tap/v0/queries", json={"query": "select 1 as one"})
        assert job.is_success
        refused = client.get(f"/data-tap/v0/queries/{job.json()['content']['id']}")
        assert refused.status_code == 429 and "retry-after" not in refused.headers
        assert "Tenant rate limit exceeded: 2 requests per hour" in refused.text
    finally:
        shared_sim.world.datatap.quota_per_hour = None


def _outcome(client, query: str) -> dict:
    job = client.post("/data-tap/v0/queries", json={"query": query}).json()["content"]["id"]
    for _ in range(10):
        content = client.get(f"/data-tap/v0/queries/{job}").json()["content"]
        if content["status"] not in ("PENDING", "RUNNING"):
            return content
    raise AssertionError("the job did not finish")


def test_spark_sql_runs_and_a_double_quoted_identifier_fails_as_live(client):
    spark = _outcome(
        client, "select `device_id`, date_add(report_date, 1) as d from devices limit 1"
    )
    assert spark["status"] == "SUCCEEDED", spark["error_message"]
    quoted = _outcome(client, 'select "device_id" from devices')
    assert quoted["status"] == "FAILED" and "double-quoted" in quoted["error_message"]


def test_every_document_and_notebook_data_tap_example_runs_on_the_simulator(client):
    import re
    import tomllib
    from pathlib import Path

    from esper_warehouse.sources.esper.tables.data_tap import Incremental

    from tests.docs import every_page

    root = Path(__file__).parents[2]
    readme = every_page() + (root / "notebooks" / "data_tap.py").read_text()
    queries = [
        query
        for block in re.findall(r"```toml\n(.*?)```", readme, re.S)
        if "data_tap_queries" in block
        for query in tomllib.loads(block)["sources"]["esper"]["data_tap_queries"].values()
    ]
    assert queries
    for query in queries:
        if isinstance(query, str):
            sqls = [query]
        else:  # the first run's SQL and a later one's
            spec = Incremental.of("q", query)
            sqls = [spec.bind(None), spec.bind({"value": "2026-01-02", "type": "date"})]
        for sql in sqls:
            outcome = _outcome(client, sql)
            assert outcome["status"] == "SUCCEEDED", (sql, outcome["error_message"])


def test_the_tables_hold_the_live_columns_and_the_live_dialect_reads_them(client):
    """live-observations section 19: text `last_seen` and figures, JSON-text stats blobs,
    `users.role_name`, `groups.group_name`, provisioning `state`, report_generation_timestamp."""
    types = _outcome(
        client,
        "select d.last_seen, s.battery_level, s.latitude, s.memory_stats, d.state, "
        "d.report_generation_timestamp from devices d join device_stats s "
        "using (report_date, device_id) limit 1",
    )
    assert types["status"] == "SUCCEEDED", types["error_message"]
    assert [c["type_name"] for c in types["result"]["schema"]["columns"]] == [
        "STRING", "STRING", "STRING", "STRING", "STRING", "TIMESTAMP",
    ]  # fmt: skip
    live = _outcome(
        client,
        """
        select
            get_json_object(s.memory_stats, '$.units') as units,
            try_cast(get_json_object(s.battery_stats, '$.level') as int) as level,
            try_cast(s.battery_level as int) as battery_level,
            count(*) as n
        from devices d
        join device_stats s using (report_date, device_id)
        join groups g on g.group_id = d.group_id and g.report_date = d.report_date
        where d.state = 'PROVISIONED'
          and try_cast(d.last_seen as timestamp)
              > d.report_generation_timestamp - interval 30 days
          and g.group_name is not null
        group by 1, 2, 3
        """,
    )
    assert live["status"] == "SUCCEEDED", live["error_message"]
    rows = live["result"]["data_array"]
    assert rows and {r[0] for r in rows} == {"BYTE"}
    assert all(r[1] == r[2] for r in rows), "the blob and the column agree"
    roles = _outcome(client, "select distinct role_name from users")
    assert roles["status"] == "SUCCEEDED" and len(roles["result"]["data_array"]) > 1
    missing = _outcome(client, "select battery_level from devices")
    assert missing["status"] == "FAILED", "live devices has no battery column"
