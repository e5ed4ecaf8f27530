"""Helpers of the pipeline tests: load a simulator into a warehouse, compare it with the truth."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
from esper_warehouse.pipelines.run.runner import RunResult, RunSettings, run
from esper_warehouse.sources.esper.http import EsperClient
from esper_warehouse.sources.esper.tables import TABLES as DECLARED
from esper_warehouse.sources.esper.times import parse_time

from tests.conftest import API_KEY, ENTERPRISE_ID

ROOT = Path(__file__).resolve().parents[2]

# table -> the fields that must equal the truth, row by row of its key (its declaration's)
COMPARED: dict[str, tuple[str, ...]] = {
    "devices": ("updated_at", "state", "os_version", "group_id"),
    "groups": ("name", "device_count"),
    "blueprints": ("version_id", "updated_at"),
    "blueprint_versions": ("id",),
    "tenant_apps": ("package_name", "updated_at"),
    "tenant_app_versions": ("app_id", "version_code"),
    "applications": ("package_name", "application_name"),  # v1 items: no updated_on
    "application_versions": ("application_id", "version_code"),
    "device_apps": ("route", "package_name", "version_code"),
    "command_requests": ("command",),
    "command_statuses": ("state", "updated_at"),
    "operations": ("state", "updated_at"),
    "operation_devices": ("state", "updated_at"),
    "device_events": ("device_id", "created_on"),
    "pipeline_runs": ("status", "updated_at"),
    "pipeline_stage_runs": ("status", "updated_at"),
    "pipeline_target_runs": ("status", "command_id"),
    "pipeline_stage_operations": ("stage_id", "operation_type", "args"),
    "pipeline_stage_targets": ("target_list_type", "device_id", "device_group_id", "is_active"),
}
TABLES = [*COMPARED, "heartbeats"]


def settings(sim: Any, warehouse: Path, **kwargs: Any) -> RunSettings:
    options = {"base_url": sim.base_url, "api_key": API_KEY, "enterprise_id": ENTERPRISE_ID}
    options.update(kwargs.pop("source_options", {}))
    kwargs.setdefault("lock_timeout_s", 5.0)
    kwargs.setdefault("build_models", False)
    return RunSettings(warehouse=warehouse, source_options=options, **kwargs)


def load(
    sim: Any, warehouse: Path, *, client_options: dict[str, Any] | None = None, **kwargs: Any
) -> RunResult:
    """One in-process run against the simulator, through a client with a short backoff.

    The client's real backoff (up to a minute between retries) belongs to its own tests; here it
    would only make the runs slow.
    """
    options = {"backoff_base": 0.05, "backoff_max": 0.5, **(client_options or {})}
    run_settings = settings(sim, warehouse, **kwargs)
    source = run_settings.source_options
    with EsperClient(
        source["base_url"], source["api_key"], source["enterprise_id"], **options
    ) as client:
        return run(run_settings, client=client)


def cli(
    sim: Any, warehouse: Path, *args: str, key: str = API_KEY, **popen: Any
) -> subprocess.Popen[str]:
    """`esper-warehouse run` in a subprocess (for kills and exit codes)."""
    env = {
        **os.environ,
        "SOURCES__ESPER__BASE_URL": sim.base_url,
        "SOURCES__ESPER__API_KEY": key,
        "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
        "ESPER_WAREHOUSE__LOCK_TIMEOUT_S": "3",
        "PYTHONPATH": str(ROOT),
    }
    env.update(popen.pop("env", {}))
    argv = [sys.executable, "-m", "esper_warehouse.pipelines.cli", *args]
    if "run" in args:
        argv += ["--warehouse", str(warehouse), "--no-models"]
    return subprocess.Popen(
        argv,
        cwd=popen.pop("cwd", ROOT),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )  # fmt: skip


def hold_file(path: Path) -> subprocess.Popen[str]:
    """Another process holding a DuckDB file open for writing (a run, the DuckDB CLI).

    Returns once the file is held; the caller kills the process.
    """
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
            "print('holding', flush=True); time.sleep(120)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "holding"
    return process


def _value(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.astimezone(UTC)
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] in "T ":
        return parse_time(v).astimezone(UTC)  # type: ignore[union-attr]
    return v


# Read-only connections opened by `reading`, by warehouse path.
_READING: dict[Path, duckdb.DuckDBPyConnection] = {}


@contextmanager
def reading(warehouse: Path) -> Iterator[None]:
    """Inside it, `rows` and `compare` on `warehouse` share one read-only connection (each call
    opens and closes its own otherwise, ~25 ms apiece). Nothing may write the file meanwhile."""
    con = duckdb.connect(str(warehouse), read_only=True)
    _READING[warehouse] = con
    try:
        yield
    finally:
        del _READING[warehouse]
        con.close()


def rows(warehouse: Path, table: str, columns: tuple[str, ...], where: str = "") -> list[tuple]:
    shared = _READING.get(warehouse)
    con = shared or duckdb.connect(str(warehouse), read_only=True)
    try:
        catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        sql = f'select {", ".join(columns)} from "{catalog}".esper.{table} {where}'
        return [tuple(_value(v) for v in r) for r in con.execute(sql).fetchall()]
    finally:
        if shared is None:
            con.close()


def compare(
    sim: Any, warehouse: Path, table: str, *, exact: bool = True, fields: tuple[str, ...] = ()
) -> None:
    """The warehouse table holds every truth record with equal key fields, no duplicates; the
    key is the table's declared key, the fields `fields` (default: `COMPARED[table]`).

    `exact`: no other rows either (after a nightly, removed records legitimately remain).
    """
    if table == "heartbeats":
        truth = {r["device_id"]: _value(r["timestamp"]) for r in sim.truth("heartbeats")}
        got = dict(rows(warehouse, "heartbeats", ("device_id", "max(timestamp)"), "group by 1"))
        missing = {d: t for d, t in truth.items() if got.get(d) != t}
        assert not missing, f"heartbeats: {len(missing)} devices differ, e.g. {list(missing)[:3]}"
        return
    key, fields = DECLARED[table].key, fields or COMPARED[table]
    where = "where _dlt_valid_to is null" if table == "device_apps" else ""
    stored = rows(warehouse, table, key + fields, where)
    keys = [r[: len(key)] for r in stored]
    assert len(keys) == len(set(keys)), f"{table}: duplicate keys in the warehouse"
    by_key = {r[: len(key)]: r[len(key) :] for r in stored}
    truth = {
        tuple(_value(t.get(k)) for k in key): tuple(_value(t.get(f)) for f in fields)
        for t in sim.truth(table)
    }
    missing = [k for k in truth if k not in by_key]
    assert not missing, f"{table}: {len(missing)} of {len(truth)} missing, e.g. {missing[:3]}"
    differ = [k for k in truth if by_key[k] != truth[k]]
    assert not differ, (
        f"{table}: {len(differ)} differ, e.g. {by_key[differ[0]]} != {truth[differ[0]]}"
    )
    if exact:
        extra = [k for k in by_key if k not in truth]
        assert not extra, f"{table}: {len(extra)} rows the API does not hold, e.g. {extra[:3]}"


def with_body(response: httpx.Response, body: Any) -> httpx.Response:
    """`response` with `body` as its JSON content (for transports that rewrite an answer): the
    status and headers are kept, but not the length or encoding of the old content."""
    headers = {k: v for k, v in response.headers.items()
               if k.lower() not in ("content-length", "content-encoding")}  # fmt: skip
    return httpx.Response(response.status_code, headers=headers, content=orjson.dumps(body))
