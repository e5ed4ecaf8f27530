"""`esper-warehouse demo`: a simulated fleet, a first load, two weeks of nightly loads, the models.

Everything runs on this machine: the Esper API simulator serves on loopback, its clock starts
`days` ago and moves a day at a time, and after each simulated day the nightly job runs exactly
as it would against a real tenant.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
from esper_warehouse.simulator import Simulator

from esper_warehouse import data_path

from . import readable
from .command import Subcommand, config_options, warehouse_options
from .exit_codes import Exit
from .runner import RunSettings, run
from .status import morning_check
from .warehouse import working_dir

log = logging.getLogger("esper_warehouse")

DEMO_KEY = "demo-key-not-a-secret-0000"
DEMO_ENTERPRISE = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


# The demo's "three worst command rollouts"; README "Worst command rollouts" is the same ranking
# (tests/notebooks/test_readme_queries.py keeps the two in step).
WORST_COMMAND_ROLLOUTS = (
    "select command, created_at, target_devices, success_rate, "
    "coalesce(failure_rate, 0) + coalesce(timeout_rate, 0), p90_minutes_to_terminal "
    "from {marts}.command_rollout where target_devices >= 5 "
    "order by coalesce(failure_rate, 0) + coalesce(timeout_rate, 0) desc, target_devices desc, "
    "command_request_id "
    "limit 3"
)


# The demo's Data Tap query, in the live dialect (Spark SQL over the live columns: text figures
# and JSON-text blobs): each device's battery and free memory per day, kept night by night (an
# incremental query, README "Data Tap"). The simulator's jobs finish by their third poll and it
# has no quota, so the demo polls every 0.1 s and affords its 15 runs (4 requests each); on a
# real tenant keep the defaults (polls after 10, 20, 30 s; 25 requests an hour).
DEMO_DATA_TAP: dict[str, object] = {
    "data_tap_queries": {
        "device_stats_daily": {
            "sql": (
                "select device_id, report_date, "
                "try_cast(battery_level as int) as battery_level, "
                "try_cast(get_json_object(memory_stats, '$.available_ram') as bigint) "
                "as available_ram_bytes "
                "from device_stats where report_date > {cursor}"
            ),
            "cursor": "report_date",
            "key": ["device_id", "report_date"],
            "lag_days": 1,
        }
    },
    "data_tap_poll_s": "0.1",
    "data_tap_requests_per_hour": 100,
}


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
    if not _fresh(warehouse):
        return Exit.CONFIG
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
                **DEMO_DATA_TAP,
            },
        )
        _say(f"2/4  First (full) load into {warehouse} ...")
        logging.getLogger("esper_warehouse").setLevel(logging.WARNING)
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
    query = "from marts.fleet_compliance limit 5"
    tool, notebook = _here("esper-warehouse"), _here(data_path("notebooks", "fleet_overview.py"))
    _say(
        "\nNext steps:\n"
        f"  explore in a notebook   {_here('marimo')} edit {notebook}\n"
        f'  query with SQL          {_here("python")} -c "import duckdb; '
        f"duckdb.connect('{warehouse}', read_only=True).sql('{query}').show()\"\n"
        f"  export the report       {tool} report --warehouse {warehouse}\n"
        f"  see the runs            {tool} status --warehouse {warehouse}\n"
        "  your own tenant         set SOURCES__ESPER__API_KEY, SOURCES__ESPER__BASE_URL and\n"
        f"                          SOURCES__ESPER__ENTERPRISE_ID, then {tool} run\n"
        "                          (README: 'Using it on a real tenant')"
    )
    return Exit.OK


def _here(what: str | Path) -> str:
    """A command of this installation or a shipped file, as the user can type it from here.

    A checkout's ``.venv/bin/marimo`` stays that; elsewhere the full path (the tool's own
    environment, e.g. pipx's), except ``esper-warehouse`` itself when the PATH finds this one.
    """
    path = what if isinstance(what, Path) else Path(sys.executable).parent / what
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        on_path = shutil.which(what) if isinstance(what, str) else None
        return what if on_path and Path(on_path) == path else str(path)


def _report(result: object, label: str = "full load") -> None:
    rows = sum(getattr(result, "rows", {}).values())
    _say(
        f"     {label}: {getattr(result, 'status', '?')}, {rows:,} rows, "
        f"{getattr(result, 'requests', 0):,} requests, {getattr(result, 'seconds', 0):.1f} s"
        + (f" — {result.error}" if getattr(result, "error", None) else "")  # type: ignore[attr-defined]
    )


def _summary(warehouse: Path) -> None:
    """What an admin wants to see first: compliance, the worst rollouts, the devices gone quiet."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        marts = f'"{catalog}".marts'

        def rows(sql: str) -> list[tuple]:
            return con.execute(sql.format(marts=marts)).fetchall()

        as_of, total = rows("select max(as_of), count(*) from {marts}.fleet_compliance")[0]
        _say(f"\nFleet summary as of {as_of:%Y-%m-%d %H:%M} UTC (API time): {total:,} devices")
        for platform, n in rows(
            "select platform, count(*) from {marts}.fleet_compliance group by 1 order by 2 desc"
        ):
            _say(f"  {platform:<10} {n:>7,}")

        _say("\nCompliance by verdict (marts.fleet_compliance):")
        for verdict, n, share in rows(
            "select verdict, count(*), count(*) / sum(count(*)) over () "
            "from {marts}.fleet_compliance group by 1 order by 2 desc"
        ):
            _say(f"  {verdict:<14} {n:>7,}  {share:>6.1%}")
        for reason, n in rows(
            "select reason, count(*) from {marts}.fleet_compliance, unnest(reasons) as r(reason) "
            "where verdict = 'non_compliant' group by 1 order by 2 desc limit 3"
        ):
            _say(f"    top reason: {reason} ({n:,} devices)")

        _say(
            "\nThe three worst command rollouts (marts.command_rollout, by failure + timeout rate):"
        )
        for command, created, targets, success, failed, p90 in rows(WORST_COMMAND_ROLLOUTS):
            p90_text = readable.duration(p90)
            _say(
                f"  {command:<24} {created:%Y-%m-%d}  {targets:>5,} devices  "
                f"success {success or 0:>6.1%}  failed/timed out {failed:>6.1%}  p90 {p90_text}"
            )

        _say("\nDevices that have gone quiet (marts.stale_devices):")
        for bucket, n in rows(
            "select last_seen_bucket, count(*) from {marts}.stale_devices group by 1 order by 2 desc"
        ):
            _say(f"  {bucket:<12} {n:>7,}")
        for n, line in enumerate(morning_check(con)):
            _say(("\n" if n == 0 else "") + line)
    except duckdb.Error as exc:
        _say(f"  (the marts are not available: {exc})")
    finally:
        con.close()


def _demo_options() -> list[argparse.ArgumentParser]:
    # The demo writes its own file (it refuses one it did not create), never the real warehouse.
    return [config_options(), warehouse_options(Path("demo.duckdb"), dataset=False)]


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--seed", type=int, default=7)


def _command(args: argparse.Namespace) -> int:
    return demo(args.warehouse, devices=args.devices, days=args.days, seed=args.seed)


SUBCOMMAND = Subcommand(
    "a simulated fleet, two weeks of nightly loads, models",
    run=_command,
    parents=_demo_options,
    arguments=_demo_arguments,
)
