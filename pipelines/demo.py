"""`esper-warehouse demo`: a simulated fleet, a first load, two weeks of nightly loads, the models.

Everything runs on this machine: the Esper API simulator serves on loopback, its clock starts
`days` ago and moves a day at a time, and after each simulated day the nightly job runs exactly
as it would against a real tenant.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from .runner import RunSettings, run
from .warehouse import working_dir

log = logging.getLogger("esper_warehouse")

DEMO_KEY = "demo-key-not-a-secret-0000"
DEMO_ENTERPRISE = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


def _say(text: str) -> None:
    print(text, flush=True)


def _fresh(warehouse: Path) -> bool:
    """Remove a previous demo's files; refuse to touch a warehouse the demo did not create."""
    marker = warehouse.with_name(warehouse.name + ".demo")
    if warehouse.exists() and not marker.exists():
        _say(f"{warehouse} exists and was not made by the demo; pass another --warehouse")
        return False
    for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        path.unlink(missing_ok=True)
    shutil.rmtree(working_dir(warehouse.resolve()), ignore_errors=True)
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("created by esper-warehouse demo\n")
    return True


def demo(warehouse: Path, *, devices: int = 2000, days: int = 14, seed: int = 7) -> int:
    """Run the demo; returns the exit code of the last load (0 when everything worked)."""
    from simulator import Simulator

    if not _fresh(warehouse):
        return 2
    started = time.monotonic()
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - timedelta(days=days)
    _say(f"1/4  Starting a simulated Esper tenant: {devices:,} devices, clock at {start:%Y-%m-%d}")
    with Simulator(
        devices=devices, seed=seed, api_key=DEMO_KEY, enterprise_id=DEMO_ENTERPRISE, start=start
    ) as sim:
        settings = RunSettings(
            warehouse=warehouse,
            lock_timeout_s=30,
            build_models=False,
            source_options={
                "base_url": sim.base_url,
                "api_key": DEMO_KEY,
                "enterprise_id": DEMO_ENTERPRISE,
            },
        )
        _say(f"2/4  First (full) load into {warehouse} ...")
        result = run(settings)
        _report(result)
        if result.exit_code:
            return result.exit_code
        _say(f"3/4  {days} simulated days, one nightly load after each:")
        for day in range(1, days + 1):
            sim.advance(hours=24)
            settings.build_models = day == days
            result = run(settings)
            _report(result, f"day {day:>2} ({sim.now:%Y-%m-%d})")
            if result.exit_code:
                return result.exit_code
    _say(f"4/4  Models built: {len(result.models)}; total {time.monotonic() - started:.0f} s")
    _summary(warehouse)
    _say(
        "\nNext steps:\n"
        f"  esper-warehouse status --warehouse {warehouse}\n"
        f"  duckdb {warehouse}   -- then e.g. select * from marts.fleet_compliance limit 10;\n"
        f"  esper-warehouse report --warehouse {warehouse}\n"
        "  Your own tenant: set SOURCES__ESPER__BASE_URL, SOURCES__ESPER__ENTERPRISE_ID and\n"
        "  SOURCES__ESPER__API_KEY (or .dlt/config.toml and .dlt/secrets.toml), then\n"
        "  esper-warehouse run   (nightly, e.g. from cron)"
    )
    return 0


def _report(result: object, label: str = "full load") -> None:
    rows = sum(getattr(result, "rows", {}).values())
    _say(
        f"     {label}: {getattr(result, 'status', '?')}, {rows:,} rows, "
        f"{getattr(result, 'requests', 0):,} requests, {getattr(result, 'seconds', 0):.1f} s"
        + (f" — {result.error}" if getattr(result, "error", None) else "")  # type: ignore[attr-defined]
    )


def _summary(warehouse: Path) -> None:
    """A few lines about the fleet, from the raw tables and (when built) the marts."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        raw = f'"{catalog}".esper'
        _say("\nFleet summary:")
        for platform, n in con.execute(
            f"select platform, count(*) from {raw}.devices d join {raw}.device_census c "
            "using (id) group by 1 order by 2 desc"
        ).fetchall():
            _say(f"  {platform:<10} {n:>7,} devices")
        as_of = con.execute(f"select max(as_of) from {raw}._esper_runs").fetchone()[0]  # type: ignore[index]
        seen = con.execute(
            f"select count(distinct device_id) from {raw}.heartbeats "
            "where timestamp >= ?::timestamptz - interval 1 day",
            [as_of],
        ).fetchone()[0]  # type: ignore[index]
        _say(f"  seen in the last 24 h: {seen:,}")
        try:
            for verdict, n in con.execute(
                f'select verdict, count(*) from "{catalog}".marts.fleet_compliance '
                "group by 1 order by 2 desc"
            ).fetchall():
                _say(f"  compliance {verdict:<12} {n:>7,}")
        except duckdb.Error:
            _say("  (compliance mart not available)")
    finally:
        con.close()
