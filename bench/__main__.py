"""`python -m bench [--quick] [--sizes 2000,20000] [--profiles none,latency,ratelimit]`.

Runs every scenario (fleet size × API behaviour) and the model build on the synthetic
150,000-device warehouse (`bench/modelbuild.py`), then rewrites `bench/README.md` and writes the
raw results to `bench/results/<timestamp>.json` (and `latest.json`). Every process it started is
stopped at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from bench import modelbuild, report
from bench.harness import REPO, stop_all
from bench.scenarios import Scenario, profiles

SIZES = (2_000, 20_000, 100_000)
QUICK_SIZES = (2_000,)


def _ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000-device scenarios only")
    parser.add_argument("--sizes", type=_ints, help="fleet sizes, comma-separated (overrides)")
    parser.add_argument(
        "--profiles",
        default="none,latency,ratelimit",
        help="API behaviours: none (0 ms), latency (50 ms), ratelimit (50 ms + rate limit)",
    )
    parser.add_argument("--rate-limit", type=float, default=200.0, help="req/s of the limit")
    parser.add_argument(
        "--skip",
        default="",
        help="steps to leave out, comma-separated: generic (the generic alternative and the "
        "4-table runs of this pipeline), io, duckdb, dlt, models, modelbuild (the build on the "
        "synthetic warehouse, bench/modelbuild.py), or a step name",
    )
    parser.add_argument(
        "--render",
        type=Path,
        nargs="+",
        metavar="RESULTS_JSON",
        help="only rewrite the README from saved results (no measurement); several files are "
        "merged in order (e.g. a 2,000 + 20,000 run and a separate 100,000 run)",
    )
    parser.add_argument(
        "--build-devices",
        type=int,
        default=modelbuild.DEVICES,
        help="devices of the synthetic warehouse the model build is measured on "
        "(bench/modelbuild.py; `--skip modelbuild` leaves it out)",
    )
    parser.add_argument(
        "--build-before",
        type=Path,
        help="a checkout of an earlier commit whose model build is measured beside this one",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--run-timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--readme", type=Path, default=REPO / "bench" / "README.md")
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: results-dir/work")
    return parser.parse_args(argv)


def _skips(text: str) -> frozenset[str]:
    """Step names (and families) to leave out."""
    families = {
        "generic": {
            "pipeline_full_4",
            "generic_full",
            "compare_full",
            "pipeline_nightly_4",
            "generic_nightly",
            "compare_nightly",
        },
        "io": {"io_floor"},
        "dlt": {"dlt_floor"},
        "duckdb": {"duckdb_floor"},
    }
    out: set[str] = set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        out |= families.get(part, {part})
    return frozenset(out)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every scenario ran without an error."""
    args = parse_args(argv)
    if args.render:
        args.readme.write_text(
            report.render(_merged([orjson.loads(p.read_bytes()) for p in args.render]))
        )
        print(f"rewrote {args.readme} from {', '.join(map(str, args.render))}")
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    known = profiles(args.rate_limit)
    chosen = [p.strip() for p in args.profiles.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in known]
    if unknown:
        print(f"unknown profile(s): {', '.join(unknown)}; known: {', '.join(known)}")
        return 2
    work = args.work_dir or args.results_dir / "work"
    args.results_dir.mkdir(parents=True, exist_ok=True)

    def on_signal(signum: int, _frame: Any) -> None:
        stop_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    started = time.perf_counter()
    scenarios: list[dict[str, Any]] = []
    try:
        for size in sizes:
            for name in chosen:
                scenario = Scenario(
                    size, known[name], work, args.seed, args.run_timeout, skip=_skips(args.skip)
                )
                scenarios.append(scenario.run())
                _write(args, scenarios, started, partial=True)
    finally:
        stop_all()
    results = _write(args, scenarios, started, partial=False)
    print(f"wrote {args.readme} and {args.results_dir / 'latest.json'}")
    if "modelbuild" not in _skips(args.skip):
        _model_build(args)
    for target in report.targets(results["scenarios"]):
        ok = target["ok"]
        verdict = ok if isinstance(ok, str) else {True: "pass", False: "FAIL", None: "n/a"}[ok]
        print(f"  {verdict:5} {target['target']} [{target['scenario']}]: {target['measured']}")
    return 1 if any(s["errors"] for s in scenarios) else 0


def _model_build(args: argparse.Namespace) -> None:
    """The model build on the synthetic warehouse (bench/modelbuild.py): its README section."""
    from bench.realtenant import write_section

    roots = {"this checkout": REPO}
    if args.build_before:
        roots["before"] = args.build_before
    result = modelbuild.measure_builds(
        roots, args.results_dir / "modelbuild", args.build_devices, args.run_timeout
    )
    command = "python -m bench " + shlex.join(sys.argv[1:])
    write_section(args.readme, modelbuild.render(result, command), modelbuild.HEADING)
    for target, measured, ok in modelbuild.verdicts(result):
        print(f"  {'pass' if ok else 'FAIL':5} model build {target}: {measured}")


def _merged(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several saved runs as one: their scenarios in order, their commands and dates listed."""
    if len(runs) == 1:
        return runs[0]
    codes = {r["machine"].get("code") for r in runs}
    return {
        **runs[0],
        "date": " and ".join(r["date"] for r in runs),
        "command": "`, then `".join(r["command"] for r in runs),
        "wall_s": sum(r["wall_s"] for r in runs),
        "partial": any(r["partial"] for r in runs),
        "machine": {**runs[0]["machine"], "code": ", ".join(sorted(c or "unknown" for c in codes))},
        "scenarios": [s for r in runs for s in r["scenarios"]],
    }


def _write(
    args: argparse.Namespace, scenarios: list[dict[str, Any]], started: float, partial: bool
) -> dict[str, Any]:
    """Write the JSON results and the README (also after each scenario, so progress survives)."""
    results = {
        "date": report.now_iso(),
        "command": "python -m bench " + shlex.join(sys.argv[1:]),
        "wall_s": time.perf_counter() - started,
        "seed": args.seed,
        "partial": partial,
        "machine": report.machine(),
        "scenarios": scenarios,
    }
    blob = orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - results["wall_s"]))
    (args.results_dir / f"{stamp}.json").write_bytes(blob)
    (args.results_dir / "latest.json").write_bytes(blob)
    args.readme.parent.mkdir(parents=True, exist_ok=True)
    from bench.realtenant import kept  # its section is measured apart: keep it

    old = args.readme.read_text() if args.readme.exists() else ""
    # sections measured apart (a real tenant, the model build at scale): kept
    args.readme.write_text(kept(old, kept(old, report.render(results)), modelbuild.HEADING))
    return results


if __name__ == "__main__":
    raise SystemExit(main())
