"""The model build at fleet scale: `build_models` on the synthetic warehouse, in its own process.

`python -m bench.modelbuild [--devices 150000] [--before PATH] [--readme bench/README.md]`
fills a synthetic warehouse (`tests/sql/synthetic.py`: N devices, 30 days of history, 15 apps
per device) once, then for each code measured (this checkout; `--before`: a checkout of an
earlier commit, e.g. `git worktree add /tmp/before 77771dd`) copies it and runs `build_models`
on the copy in a child process whose wall, CPU seconds and peak RSS come from `os.wait4` on that
child (bench/harness.py `measure`), and times each model inside it. `make bench-quick` and
`make bench` run it too. It writes its section of bench/README.md (kept when `python -m bench`
rewrites the rest).

The child is this file run as a script with `PYTHONPATH` set to the code measured and that
folder as its working directory, so `esper_warehouse` is imported from there; it records the
file it imported and the run fails if that is not inside the code measured. The per-model
timing wraps `pipelines.build.models._build_model` in the child (as `tests/sql/synthetic.py` does), so
an earlier commit is timed the same way without a hook of its own.

Generating the warehouse takes ~10 s at 150,000 devices (2 cores), so it is made afresh each
run rather than cached.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HEADING = "## The model build at fleet scale (synthetic warehouse)"
DEVICES = 150_000
TARGET_CPU_S = 12.0
TARGET_PEAK_MB = 1_500.0
TOP = 5


def _child_build(warehouse: Path, out: Path) -> None:
    """In the child: build the models into `warehouse`, write per-model times to `out`."""
    from esper_warehouse.pipelines.build import models

    timed: list[dict[str, Any]] = []
    build_model = models._build_model

    def timing(con: Any, model: Any, *rest: Any) -> None:
        started, cpu = time.perf_counter(), os.times()
        build_model(con, model, *rest)
        after = os.times()
        timed.append(
            {
                "relation": model.relation,
                "wall_s": time.perf_counter() - started,
                "cpu_s": (after.user - cpu.user) + (after.system - cpu.system),
            }
        )

    models._build_model = timing
    started = time.perf_counter()
    built = models.build_models(warehouse)
    out.write_text(
        json.dumps(
            {
                "models_from": str(Path(models.__file__).resolve()),
                "relations": len(built),
                "build_wall_s": time.perf_counter() - started,
                "models": timed,
            }
        )
    )


def _child_fill(warehouse: Path, devices: int, out: Path) -> None:
    """In the child: fill `warehouse` with the synthetic fleet; write row counts to `out`."""
    from tests.sql.synthetic import fill

    out.write_text(json.dumps(fill(warehouse, devices)))


def _commit(root: Path) -> str:
    """The checkout's commit, with `+` when what the build runs (sql/, pipelines/) differs from
    it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "sql", "pipelines")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+" if changed else "")


def measure_builds(
    roots: dict[str, Path], work: Path, devices: int = DEVICES, timeout_s: float = 1800.0
) -> dict[str, Any]:
    """Fill one synthetic warehouse, then build it with each code of `roots` (label -> checkout)."""
    from bench.harness import PYTHON, REPO, measure

    work.mkdir(parents=True, exist_ok=True)
    source = work / f"synthetic-{devices}.duckdb"
    for stale in (source, source.with_suffix(".duckdb.wal")):
        stale.unlink(missing_ok=True)
    counts = work / "fill.json"
    fill = measure(
        "synthetic_fill",
        [PYTHON, str(Path(__file__).resolve()), "fill", str(source), str(devices), str(counts)],
        env={"PYTHONPATH": str(REPO)},
        log_path=work / "fill.log",
        timeout_s=timeout_s,
    )
    if fill.returncode != 0:
        raise RuntimeError(f"filling the synthetic warehouse failed: see {work / 'fill.log'}")
    rows = json.loads(counts.read_text())
    builds = []
    for label, root in roots.items():
        root = root.resolve()
        slug = "-".join(label.split())
        target = work / f"build-{slug}.duckdb"
        for stale in (target, target.with_suffix(".duckdb.wal")):
            stale.unlink(missing_ok=True)
        shutil.copyfile(source, target)
        out = work / f"build-{slug}.json"
        out.unlink(missing_ok=True)
        m = measure(
            f"model_build_{label}",
            [PYTHON, str(Path(__file__).resolve()), "build", str(target), str(out)],
            env={"PYTHONPATH": str(root)},
            cwd=root,
            log_path=work / f"build-{slug}.log",
            timeout_s=timeout_s,
        )
        if m.returncode != 0 or not out.exists():
            raise RuntimeError(f"the build of {label} failed: see {work / f'build-{slug}.log'}")
        inside = json.loads(out.read_text())
        if not Path(inside["models_from"]).is_relative_to(root):
            raise RuntimeError(f"{label}: imported {inside['models_from']}, not from {root}")
        ranked = sorted(inside["models"], key=lambda t: t["wall_s"], reverse=True)
        builds.append(
            {
                "label": label,
                "commit": _commit(root),
                "models_from": inside["models_from"],
                "relations": inside["relations"],
                "wall_s": m.wall_s,
                "cpu_s": m.cpu_s,
                "peak_rss_mb": m.peak_rss_mb,
                "top": ranked[:TOP],
            }
        )
        target.unlink(missing_ok=True)
    source.unlink(missing_ok=True)
    return {
        "devices": devices,
        "fill_wall_s": fill.wall_s,
        "device_apps": rows.get("device_apps"),
        "heartbeats": rows.get("heartbeats"),
        "load_average": os.getloadavg(),
        "builds": builds,
    }


def verdicts(result: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(target, measured, ok) for the first build (this checkout)."""
    build = result["builds"][0]
    return [
        (
            f"CPU ≤ {TARGET_CPU_S:g} s",
            f"{build['cpu_s']:.1f} CPU-s",
            build["cpu_s"] <= TARGET_CPU_S,
        ),
        (
            f"peak RSS ≤ {TARGET_PEAK_MB:,.0f} MB",
            f"{build['peak_rss_mb']:,.0f} MB",
            build["peak_rss_mb"] <= TARGET_PEAK_MB,
        ),
    ]


def render(result: dict[str, Any], command: str) -> str:
    """This benchmark's section of bench/README.md."""
    builds = result["builds"]
    load = ", ".join(f"{x:.1f}" for x in result["load_average"])
    lines = [
        HEADING,
        "",
        f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"(load average {load}). The synthetic warehouse (`tests/sql/synthetic.py`): "
        f"{result['devices']:,} devices, {result['device_apps']:,} app records, "
        f"{result['heartbeats']:,} heartbeats, filled in {result['fill_wall_s']:.1f} s; each code "
        "builds its own copy of it with `build_models` in its own process (wall, CPU seconds and "
        "peak RSS from `wait4` on that process, Python start and imports included).",
        "",
        "| code | wall s | CPU s | peak RSS MB | relations |",
        "|---|---|---|---|---|",
    ]
    for b in builds:
        lines.append(
            f"| {b['label']} ({b['commit']}) | {b['wall_s']:.2f} | {b['cpu_s']:.2f} | "
            f"{b['peak_rss_mb']:,.0f} | {b['relations']} |"
        )
    lines += ["", "Targets (issue 53), this checkout:", ""]
    for target, measured, ok in verdicts(result):
        lines.append(f"- {target}: {measured}, **{'pass' if ok else 'FAIL'}**")
    for b in builds:
        lines += [
            "",
            f"The {TOP} most expensive models, {b['label']} ({b['commit']}):",
            "",
            "| model | wall s | CPU s |",
            "|---|---|---|",
        ]
        lines += [f"| `{t['relation']}` | {t['wall_s']:.2f} | {t['cpu_s']:.2f} |" for t in b["top"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["build"]:
        _child_build(Path(args[1]), Path(args[2]))
        return 0
    if args[:1] == ["fill"]:
        _child_fill(Path(args[1]), int(args[2]), Path(args[3]))
        return 0
    from bench.harness import REPO
    from bench.realtenant import write_section

    parser = argparse.ArgumentParser(prog="python -m bench.modelbuild", description=__doc__)
    parser.add_argument("--devices", type=int, default=DEVICES)
    parser.add_argument("--before", type=Path, help="a checkout of an earlier commit, measured too")
    parser.add_argument("--readme", type=Path, default=REPO / "bench" / "README.md")
    parser.add_argument("--work-dir", type=Path, default=REPO / "bench" / "results" / "modelbuild")
    parsed = parser.parse_args(args)
    roots = {"this checkout": REPO}
    if parsed.before:
        roots["before"] = parsed.before
    result = measure_builds(roots, parsed.work_dir, parsed.devices)
    command = "python -m bench.modelbuild " + " ".join(args)
    write_section(parsed.readme, render(result, command.strip()), HEADING)
    print(render(result, command.strip()))
    return 0 if all(ok for _, _, ok in verdicts(result)) else 1


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script (the child): this file's folder is not bench
        sys.path.pop(0)
    raise SystemExit(main())
