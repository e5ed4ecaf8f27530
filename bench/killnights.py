"""Nights of runs killed at random instants (issue 13): nothing doubled, nothing lost.

`.venv/bin/python -m bench.killnights [--nights 8] [--devices 1000] [--seed 1] [--readme bench/README.md]`

Each simulated night, `esper-warehouse run` (a real process) is SIGKILLed at a random instant
of its run (uniform over 0-110 % of how long the previous clean run of that kind took, so
some kills land in extraction, some in the load, some after it), then run again to the end. After
each night every raw table is compared with the simulator's truth (one row per key, equal
fields; rows of devices removed since the last full scan may remain, as a nightly cannot see
removals) and checked for duplicate keys. The first night is a first load committed in parts
(`commit_every_devices` = a quarter of the fleet), so kills also land between parts.

Prints a Markdown section; with `--readme`, writes it into that file in place of the section of
the same heading (appended when absent).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
from esper_warehouse.simulator import Simulator  # noqa: E402
from esper_warehouse.sources.esper.tables import TABLES as DECLARED  # noqa: E402

from bench.realtenant import write_section  # noqa: E402
from tests.conftest import API_KEY, ENTERPRISE_ID  # noqa: E402
from tests.pipeline.helpers import TABLES, cli, compare, load, rows  # noqa: E402

HEADING = "## Nights killed at random instants"
NOT_EXACT = ("devices", "device_events", "heartbeats", "device_apps")  # checked apart below
STAGES = ("load: part", "load: done", "load: started", "normalize: started", "extract: ")


def duplicate_keys(wh: Path) -> dict[str, int]:
    """Rows beyond one per key, per raw table (current rows of `device_apps`)."""
    found = {}
    with duckdb.connect(str(wh), read_only=True) as con:
        for table, endpoint in DECLARED.items():
            if not endpoint.key:
                continue  # replaced whole by each run (the census)
            where = " where _dlt_valid_to is null" if table == "device_apps" else ""
            key = ", ".join(endpoint.key)
            try:
                total, distinct = con.sql(
                    f"select count(*), count(distinct ({key})) from esper.{table}{where}"
                ).fetchone()  # type: ignore[misc]
            except duckdb.CatalogException:
                continue  # a table this tenant never filled
            if total != distinct:
                found[table] = total - distinct
    return found


def last_stage(stderr: str) -> str:
    """The last step the killed run logged (where the kill landed, roughly)."""
    for line in reversed(stderr.splitlines()):
        for stage in STAGES:
            if stage in line:
                return line.split("esper_warehouse", 1)[-1].strip(" :")[:80]
    return "before extraction"


def night(sim: Simulator, wh: Path, rng: random.Random, expected_s: float, part: int) -> dict:
    """One night: a run killed at a random instant, then run again; checks against the truth."""
    delay = rng.uniform(0, 1.1 * expected_s)
    env = {"SOURCES__ESPER__COMMIT_EVERY_DEVICES": str(part)}
    proc = cli(sim, wh, "run", env=env, start_new_session=True)
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # this process's own group, by its id
    with contextlib.suppress(subprocess.TimeoutExpired):
        _, stderr = proc.communicate(timeout=60)
    started = time.perf_counter()
    again = load(sim, wh, source_options={"commit_every_devices": part})
    seconds = time.perf_counter() - started
    differ = []
    for table in TABLES:
        try:  # removed devices' rows legitimately stay after the first night
            compare(sim, wh, table, exact=table not in NOT_EXACT)
        except AssertionError as error:
            differ.append(str(error).splitlines()[0])
    # a nightly cannot see removals (the weekly scan retires them): only removed devices' apps
    # may still be current
    fleet = {d["id"] for d in sim.truth("devices")}
    current = set(rows(wh, "device_apps", ("device_id", "id"), "where _dlt_valid_to is null"))
    extra = current - {(a["device_id"], a["id"]) for a in sim.truth("device_apps")}
    if wrong := [e for e in extra if e[0] in fleet]:
        differ.append(f"device_apps: {len(wrong)} current rows the API does not hold, {wrong[:2]}")
    return {
        "delay_s": round(delay, 2),
        "killed": killed,
        "stage": last_stage(stderr or "") if killed else "finished before the kill",
        "rerun_exit": again.exit_code,
        "rerun_mode": again.mode,
        "rerun_s": round(seconds, 1),
        "duplicates": duplicate_keys(wh),
        "differ": differ,
    }


def timed_run(sim: Simulator, wh: Path, part: int) -> float:
    """Seconds a clean `esper-warehouse run` process takes, start-up included."""
    started = time.perf_counter()
    proc = cli(sim, wh, "run", env={"SOURCES__ESPER__COMMIT_EVERY_DEVICES": str(part)})
    _, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == 0, stderr[-2000:]
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.killnights", description=__doc__)
    parser.add_argument("--nights", type=int, default=8)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--readme", type=Path, default=None)
    args = parser.parse_args(argv)
    cmd = "python -m bench.killnights " + " ".join(argv if argv is not None else sys.argv[1:])
    rng = random.Random(args.seed)
    part = max(1, args.devices // 4)
    nights: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="killnights-") as tmp:
        fleet = {"devices": args.devices, "api_key": API_KEY, "enterprise_id": ENTERPRISE_ID}
        # how long a clean first load and a clean nightly take (as processes), on a twin fleet
        with Simulator(seed=7, **fleet) as twin:
            twin_wh = Path(tmp) / "twin.duckdb"
            first_s = timed_run(twin, twin_wh, part)
            twin.advance(hours=24)
            nightly_s = timed_run(twin, twin_wh, part)
        with Simulator(seed=7, **fleet) as sim:
            wh = Path(tmp) / "killed.duckdb"
            for n in range(args.nights):
                if n:
                    sim.advance(hours=24)
                nights.append(night(sim, wh, rng, first_s if n == 0 else nightly_s, part))
                print(nights[-1], flush=True)
    clean = all(x["rerun_exit"] == 0 and not x["duplicates"] and not x["differ"] for x in nights)
    lines = [
        HEADING,
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{cmd.strip()}` (issue 13): "
        f"{args.devices:,} devices, {args.nights} nights; each night's run SIGKILLed at a random "
        f"instant (clean first load {first_s:.1f} s, clean nightly {nightly_s:.1f} s), then run "
        "again; every raw table compared with the truth and checked for duplicate keys.",
        "",
        "| night | killed after | where the kill landed (last log line) | rerun | "
        "duplicate keys | tables differing from the truth |",
        "|---|---|---|---|---|---|",
    ]
    for n, x in enumerate(nights, 1):
        lines.append(
            f"| {n} | {x['delay_s']} s | {x['stage'] if x['killed'] else 'not killed: done'} | "
            f"exit {x['rerun_exit']}, {x['rerun_mode']}, {x['rerun_s']} s | "
            f"{x['duplicates'] or 0} | {'; '.join(x['differ']) or 'none'} |"
        )
    lines += ["", f"Result: {'**no duplicate, no row lost**' if clean else '**FAILED**'}."]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.readme:
        write_section(args.readme, section, HEADING)
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
