"""`esper-warehouse demo`: a simulated fleet, a first load, two weeks of nightly loads, the models.

Everything runs on this machine: the Esper API simulator serves on loopback, its clock starts
`days` ago and moves a day at a time, and after each simulated day the nightly job runs exactly
as it would against a real tenant.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
from esper_warehouse.simulator import Simulator

from esper_warehouse import data_path

from .. import extras, readable
from ..exit_codes import Exit
from ..run.runner import RunSettings, run
from ..views import headlines
from ..views.status import morning_check
from ..warehouse import working_dir

log = logging.getLogger("esper_warehouse")

DEMO_KEY = "demo-key-not-a-secret-0000"
DEMO_ENTERPRISE = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


# The demo's Data Tap query, in the live dialect (Spark SQL over the live columns: text figures
# and JSON-text blobs): each device's battery and free memory per day, kept night by night (an
# incremental query, docs/guide/data-tap.md). The simulator's jobs finish by their third poll and it
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
            # the night before the last too: the record of changes compares the last with it
            settings.build_models = day >= days - 1
            result = run(settings)
            _report(result, f"day {day:>2} ({sim.now:%Y-%m-%d})")
            if result.exit_code:
                return result.exit_code
    _say(f"4/4  Models built: {len(result.models)}; total {time.monotonic() - started:.0f} s")
    _summary(warehouse)
    _say(next_steps(warehouse))
    return Exit.OK


def next_steps(warehouse: Path) -> str:
    """What to try after the demo: only commands this installation has (a tool installed
    without the `notebooks` extra gets the command that installs it instead of marimo's)."""
    query = "from marts.fleet_compliance limit 5"
    tool, notebook = _here("esper-warehouse"), _here(data_path("notebooks", "fleet_overview.py"))
    lacking = extras.needs("notebooks and the report")
    explore = f"{_here('marimo')} edit {notebook}" if lacking is None else lacking
    export = f"{tool} report --warehouse {warehouse}" if lacking is None else "(the same extra)"
    return (
        "\nNext steps:\n"
        f"  explore in a notebook   {explore}\n"
        f'  query with SQL          {_here("python")} -c "import duckdb; '
        f"duckdb.connect('{warehouse}', read_only=True).sql('{query}').show()\"\n"
        f"  export the report       {export}\n"
        f"  see the runs            {tool} status --warehouse {warehouse}\n"
        "  your own tenant         set SOURCES__ESPER__API_KEY, SOURCES__ESPER__BASE_URL and\n"
        f"                          SOURCES__ESPER__ENTERPRISE_ID, then {tool} run\n"
        "                          (README: 'A real tenant in five steps')"
    )


def _here(what: str | Path) -> str:
    """A command of this installation or a shipped file, as the user can type it from here.

    A checkout's ``.venv/bin/marimo`` stays that; elsewhere the full path (the tool's own
    environment, e.g. pipx's), except a command the PATH finds as this one (`uv tool install`
    links ``esper-warehouse`` into ``~/.local/bin``): its bare name.
    """
    path = what if isinstance(what, Path) else Path(sys.executable).parent / what
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        on_path = shutil.which(what) if isinstance(what, str) else None
        return what if on_path and Path(on_path).resolve() == path else str(path)


def _report(result: object, label: str = "full load") -> None:
    rows = sum(getattr(result, "rows", {}).values())
    _say(
        f"     {label}: {getattr(result, 'status', '?')}, {rows:,} rows, "
        f"{getattr(result, 'requests', 0):,} requests, {getattr(result, 'seconds', 0):.1f} s"
        + (f" — {result.error}" if getattr(result, "error", None) else "")  # type: ignore[attr-defined]
    )


def _summary(warehouse: Path) -> None:
    """What an admin wants to see first, every number read from marts.headlines: compliance, the
    top reasons, the worst rollouts, the devices gone quiet, then `status`'s morning check."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        numbers = headlines.read(con)
        devices = numbers.number("devices") if numbers else None
        if numbers is None or devices is None:
            _say("  (the marts are not available: run `esper-warehouse models`)")
            return
        for line in _fleet_lines(con, numbers):
            _say(line)
        for n, line in enumerate(morning_check(con)):
            _say(("\n" if n == 0 else "") + line)
    except duckdb.Error as exc:
        _say(f"  (the marts are not available: {exc})")
    finally:
        con.close()


def _fleet_lines(con: duckdb.DuckDBPyConnection, numbers: headlines.Headlines) -> list[str]:
    """The summary's fleet, compliance, rollout and last-seen lines (marts.headlines)."""
    as_of = con.execute(f"select max(as_of) from {headlines.marts(con)}.headlines").fetchone()[0]  # type: ignore[index]
    devices = numbers.number("devices")
    lines = [
        f"\nFleet summary as of {as_of:%Y-%m-%d %H:%M} UTC (API time): {devices.value:,} devices"
    ]  # type: ignore[union-attr]
    lines += [f"  {r.item:<10} {r.value:>7,}" for r in numbers.items("devices")]
    rate = numbers.number("compliance_rate")
    lines.append(
        rate.aged(  # type: ignore[union-attr]
            f"\nCompliance (marts.headlines), of the {rate.denominator or 0:,} devices in service:"  # type: ignore[union-attr]
        )
    )
    for name, word in (("compliance_rate", "compliant"), ("non_compliant_devices", "non_compliant"),
                       ("unverified_devices", "unverified")):  # fmt: skip
        row = numbers.number(name)
        lines.append(f"  {word:<14} {row.value if row else 0:>7,}  {headlines.share(row):>6}")
    out = numbers.number("out_of_service_devices")
    lines.append(
        f"  {'out_of_service':<14} {out.value if out else 0:>7,}  "
        f"({headlines.share(out)} of all devices, in no rate)"
    )
    reasons = numbers.items("top_reasons")
    top = reasons[:3]
    if top:
        # "N of M" when the list is longer than the lines (readable.shown_of: every surface's rule)
        cut = readable.shown_of(len(top), len(reasons))
        lines.append(
            f"  top reasons{f' ({cut}: all in marts.headlines)' if cut else ''} among the "
            f"{top[0].denominator or 0:,} non-compliant devices:"
        )
        lines += [f"    {r.label} ({r.item}): {r.value:,} devices" for r in top]
    worst = len(numbers.items("worst_command_rollouts"))
    ranked = con.execute(
        f"select count(failing_rank) from {headlines.marts(con)}.command_rollout"
    ).fetchone()[0]  # type: ignore[index]
    cut = readable.shown_of(worst, ranked)
    title = (
        "\nThe worst command rollouts"
        + (f" ({cut} ranked; all in marts.command_rollout.failing_rank)" if cut else "")
        + " (marts.headlines: requests to "
        f"{headlines.ranked_from_devices(con)} devices or more, by failure + timeout rate):"
    )
    unknown = numbers.number("worst_command_rollouts")  # a row of its own only when unknown
    aged = numbers.items("worst_command_rollouts")[:1] or ([unknown] if unknown else [])
    lines.append(aged[0].aged(title) if aged else title)
    lines += [] if unknown else _worst_rollouts(con, numbers)
    unseen = numbers.number("not_seen_devices")
    if unseen:
        lines.append(f"\n{unseen.label} (marts.stale_devices): {unseen.value:,}")
    lines += [f"  {r.item:<12} {r.value:>7,}" for r in numbers.items("not_seen_devices")]
    return lines


def _worst_rollouts(con: duckdb.DuckDBPyConnection, numbers: headlines.Headlines) -> list[str]:
    """The worst command rollouts of marts.headlines, each with its date, success and p90 from
    marts.command_rollout (the request's own columns, not a number of its own)."""
    lines = []
    for row in numbers.items("worst_command_rollouts"):
        created, success, p90 = con.execute(
            "select created_at, success_rate, p90_minutes_to_terminal "
            f"from {headlines.marts(con)}.command_rollout where command_request_id = ?",
            [row.item],
        ).fetchone()  # type: ignore[misc]
        p90_text = readable.duration(p90)
        lines.append(
            f"  {row.label:<24} {created:%Y-%m-%d}  {row.denominator or 0:>5,} devices  "
            f"success {success or 0:>6.1%}  failed/timed out {row.share or 0:>6.1%}  p90 {p90_text}"
        )
    fewest = headlines.ranked_from_devices(con)
    return lines or [f"  (no command request to {fewest} devices or more yet)"]
