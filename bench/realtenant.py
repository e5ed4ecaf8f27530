"""Real-tenant figures (issue 14): requests per device and what they cost at 25 requests/s.

`.venv/bin/python -m bench.realtenant [--devices 2000] [--limited 300] [--readme bench/README.md]`

1. Request counts on a fleet of `--devices` without a rate limit (counts do not depend on it):
   a first load, a nightly after one simulated day (~2 % of devices change), and the scheduled
   (weekly) full scan one day later (`full_scan_interval_days` 1.5 to make it due), each with its requests per device and its share of the first load, and
   the hours each would take at 150,000 devices and 25 requests/s (Esper's own client caps
   itself at 8,000 calls per 5 minutes, live-observations §13-14).
2. First loads of `--resume-devices` (5,000) killed part-way (SIGKILL of `esper-warehouse run`
   at 30 %, 60 % and 90 % of a clean load's requests) and run again: the requests of both
   together against a clean load, and the resumed warehouse compared with the truth.
3. A first load of `--limited` devices against the simulator rate-limited to 25 requests/s
   (429 with Retry-After), once on bare loopback and once with `--latency-ms` added per request
   (a real tenant answers in tens to hundreds of milliseconds): does the client hold the rate?

Prints a Markdown section; with `--readme`, writes it into that file in place of the section of
the same heading (appended when absent). Every process it starts is stopped by its own id.
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

from esper_warehouse.pipelines.run.runner import run  # noqa: E402
from esper_warehouse.simulator import Simulator  # noqa: E402
from esper_warehouse.sources.esper.settings import EsperSourceConfiguration  # noqa: E402

from tests.conftest import API_KEY, ENTERPRISE_ID  # noqa: E402
from tests.pipeline.helpers import TABLES, cli, compare, load, settings  # noqa: E402

HEADING = "## Real-tenant time: requests per device at 25 requests/s"
RATE = 25.0  # requests/s a real tenant allows (Esper's client: 8,000 per 5 minutes)
TENANT = 150_000  # devices of the projection (the live tenant had 142,632)
EVENTS = "GET /enterprise/{eid}/device/{id}/download/eventfeed/"


def hours_at(per_device: float) -> float:
    """Hours a run of `per_device` requests per device takes at TENANT devices and RATE."""
    return per_device * TENANT / RATE / 3600


def sent(sim: Simulator) -> int:
    """Requests the simulator answered since its counters were last reset (429s included)."""
    return int(sim.stats()["total"])


def by_route(sim: Simulator) -> dict[str, int]:
    return {k: v for k, v in sorted(sim.stats()["routes"].items(), key=lambda kv: -kv[1])}


def counts(devices: int, work: Path) -> dict[str, Any]:
    """First load, nightly and weekly full scan on one fleet: requests and changed share."""
    out: dict[str, Any] = {"devices": devices}
    with Simulator(devices=devices, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID) as sim:
        wh = work / "counts.duckdb"
        for name, before in (("first", None), ("nightly", 24.0), ("weekly", 24.0)):
            if before:
                start = sim.now
                sim.advance(hours=before)
                changed = sum(
                    1 for d in sim.truth("devices")
                    if datetime.fromisoformat(d["updated_at"].replace("Z", "+00:00")) > start
                )  # fmt: skip
                out[f"{name}_changed"] = changed / len(sim.truth("devices"))
            sim.reset_stats()
            started = time.perf_counter()
            # the scheduled full scan (due after 1.5 days here), not `run --full`
            result = load(sim, wh, source_options={"full_scan_interval_days": 1.5})
            assert result.exit_code == 0, result.error
            out[name] = {
                "requests": sent(sim),
                "seconds": round(time.perf_counter() - started, 1),
                "mode": result.mode,
                "routes": by_route(sim),
            }
    return out


def killed_and_resumed(devices: int, work: Path, at: tuple[float, ...]) -> dict[str, Any]:
    """A clean first load of `devices`, then first loads killed (SIGKILL) at each share of its
    requests in `at` and run again to the end; each resumed warehouse is compared with the truth.
    """

    def fleet() -> Simulator:
        return Simulator(devices=devices, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID)

    with fleet() as sim:
        started = time.perf_counter()
        result = load(sim, work / "clean.duckdb")
        assert result.exit_code == 0, result.error
        clean = sent(sim)
        out: dict[str, Any] = {
            "devices": devices,
            "clean": clean,
            "clean_seconds": round(time.perf_counter() - started, 1),
            "kills": [],
        }
    for share in at:
        with fleet() as sim:
            wh = work / f"resumed-{share:g}.duckdb"
            proc = cli(sim, wh, "run", start_new_session=True)
            try:
                deadline = time.monotonic() + 1800
                while sent(sim) < share * clean and proc.poll() is None:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
                killed_at = sent(sim)
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)  # this process's own group, by its id
            finally:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.communicate(timeout=30)
            result = load(sim, wh)
            assert result.exit_code == 0, result.error
            total = sent(sim)
            differ = []
            for table in TABLES:
                try:
                    compare(sim, wh, table)
                except AssertionError as error:
                    differ.append(str(error).splitlines()[0])
            out["kills"].append(
                {
                    "share": share,
                    "killed_at": killed_at,
                    "total": total,
                    "ratio": total / clean,
                    "equal_to_truth": not differ,
                    "differ": differ,
                }
            )
    return out


def rate_limited(devices: int, work: Path, latency_ms: float = 0) -> dict[str, Any]:
    """A first load through a simulator that allows RATE requests/s (429 + Retry-After)."""
    with Simulator(
        devices=devices,
        seed=7,
        api_key=API_KEY,
        enterprise_id=ENTERPRISE_ID,
        rate_limit=RATE,
        latency_ms=latency_ms,
    ) as sim:
        started = time.perf_counter()
        warehouse = work / f"limited-{latency_ms:g}ms.duckdb"
        result = run(settings(sim, warehouse))  # the client's own defaults
        seconds = time.perf_counter() - started
        stats = sim.stats()
    ok = int(stats["statuses"].get("200", 0))
    return {
        "devices": devices,
        "latency_ms": latency_ms,
        "exit_code": result.exit_code,
        "error": result.error,
        "seconds": round(seconds, 1),
        "answered": ok,
        "throttled": int(stats["statuses"].get("429", 0)),
        "rate": ok / seconds,
        "client_retries": result.retries,
    }


def render(
    c: dict[str, Any], resumed: dict[str, Any], limited: list[dict[str, Any]], cmd: str
) -> str:
    n = c["devices"]
    first = c["first"]["requests"]
    lines = [
        HEADING,
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{cmd}` (issue 14). Request "
        "counts do not depend on the rate limit, so they come from a fleet without one; hours "
        f"= requests per device × {TENANT:,} ÷ {RATE:g} ÷ 3600.",
        "",
        f"| run ({n:,} devices) | requests | per device | share of the first load | "
        f"hours at {TENANT:,} devices, {RATE:g} req/s |",
        "|---|---|---|---|---|",
    ]
    for name, label in (
        ("first", "first load"),
        ("nightly", f"nightly ({c['nightly_changed']:.1%} of devices changed that day)"),
        ("weekly", f"scheduled full scan ({c['weekly_changed']:.1%} changed that day)"),
    ):
        req = c[name]["requests"]
        lines.append(
            f"| {label} | {req:,} | {req / n:.3f} | {req / first:.1%} | {hours_at(req / n):.2f} |"
        )

    def top(run: str) -> str:
        return ", ".join(f"`{k}` {v:,}" for k, v in list(c[run]["routes"].items())[:5])

    lines += [
        "",
        f"- First load by route (largest five): {top('first')}.",
        f"- Nightly by route (largest five): {top('nightly')}.",
        f"- Killed and resumed first loads ({resumed['devices']:,} devices; a clean first load: "
        f"{resumed['clean']:,} requests, {resumed['clean_seconds']} s; committed in parts of "
        f"{EsperSourceConfiguration.commit_every_devices:,} devices): "
        + "; ".join(
            f"SIGKILL after {k['killed_at']:,} requests (~{k['killed_at'] / resumed['clean']:.0%}), "
            f"then `run` again: {k['total']:,} in all, **{k['ratio']:.2f}×** a clean load, "
            + (
                "tables equal to the truth"
                if k["equal_to_truth"]
                else "DIFFER: " + "; ".join(k["differ"])
            )
            for k in resumed["kills"]
        )
        + " (target ≤ 1.15×).",
        *(
            f"- Rate-limited first load, {x['devices']:,} devices, simulator at {RATE:g} "
            f"requests/s with 429 + Retry-After, {x['latency_ms']:g} ms added latency: exit "
            f"{x['exit_code']}, {x['seconds']} s, {x['answered']:,} answered requests "
            f"({x['rate']:.1f} per second), {x['throttled']:,} answered 429"
            + (f" ({x['error']})." if x["error"] else ".")
            for x in limited
        ),
    ]
    return "\n".join(lines) + "\n"


def kept(old: str, new: str, heading: str = HEADING) -> str:
    """`new` (the README `python -m bench` rendered) with the section under `heading` (this
    one's by default) of `old` carried over."""
    if heading not in old or heading in new:
        return new
    section = heading + old.split(heading, 1)[1].split("\n## ", 1)[0]
    return new.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"


def write_section(readme: Path, section: str, heading: str = HEADING) -> None:
    """Replace the section under `heading` (up to the next `## `) or append it."""
    text = readme.read_text() if readme.exists() else ""
    if heading in text:
        head, rest = text.split(heading, 1)
        tail = rest.split("\n## ", 1)
        text = head + section + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realtenant", description=__doc__)
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--limited", type=int, default=300)
    parser.add_argument(
        "--resume-devices", type=int, default=5000, help="fleet of the killed first loads"
    )
    parser.add_argument("--readme", type=Path, default=None)
    parser.add_argument(
        "--latency-ms", type=float, default=100, help="of the second rate-limited load"
    )
    parser.add_argument("--limited-only", action="store_true", help="only the rate-limited load")
    args = parser.parse_args(argv)
    cmd = "python -m bench.realtenant " + " ".join(argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="realtenant-") as tmp:
        work = Path(tmp)
        if args.limited_only:
            print(rate_limited(args.limited, work, args.latency_ms))
            return 0
        c = counts(args.devices, work)
        print({k: (v if not isinstance(v, dict) else v["requests"]) for k, v in c.items()})
        resumed = killed_and_resumed(args.resume_devices, work, (0.3, 0.6, 0.9))
        print(resumed)
        limited = [rate_limited(args.limited, work, ms) for ms in (0, args.latency_ms)]
        print(limited)
    section = render(c, resumed, limited, cmd.strip())
    print(section)
    if args.readme:
        write_section(args.readme, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
