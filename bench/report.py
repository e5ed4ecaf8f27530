"""Turn measured scenarios into `bench/README.md` (tables, ratios, targets) and raw JSON."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from bench import nightfloor

RUN_ROWS = (
    ("pipeline_full", "this pipeline, full load"),
    ("io_floor", "I/O floor (httpx, same pages)"),
    ("duckdb_floor", "DuckDB floor (Arrow CTAS, same rows)"),
    ("pipeline_full_4", "this pipeline, full load, 4 tables"),
    ("generic_full", "generic rest_api, full load, 4 tables"),
    ("dlt_floor", "dlt floor (default pipeline, one row)"),
    ("pipeline_nightly", "this pipeline, nightly load"),
    ("pipeline_nightly_4", "this pipeline, nightly load, 4 tables"),
    ("generic_nightly", "generic rest_api, nightly load, 4 tables"),
    ("models", "SQL models build"),
)
COLUMNS = (
    "run",
    "wall s",
    "requests",
    "rows",
    "rows/s",
    "peak RSS MB",
    "sim peak RSS MB",
    "CPU s",
    "sim CPU s",
    "requests vs full",
)
GROWTH_TOLERANCE = 1.2  # a figure may grow at most 1.2x faster than the fleet between two sizes
GROWTH_FIGURES = ("wall_s", "requests", "peak_rss_mb", "cpu_s")


def _code_version() -> str:
    """The commit measured (read-only git), and whether the working tree differed from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} (working tree with uncommitted changes)" if dirty else head


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model and the versions that matter."""
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {
        "code": _code_version(),
        "cpu_model": model,
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "dlt": version("dlt"),
        "duckdb": version("duckdb"),
        "httpx": version("httpx"),
        "pyarrow": version("pyarrow"),
        "polars": version("polars"),
    }


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and digits == 0):
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def scenario_table(scenario: dict[str, Any]) -> list[str]:
    """The markdown table of one scenario: one row per run."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for label, title in RUN_ROWS:
        run = scenario["runs"].get(label)
        if run is None:
            why = "skipped" if label in scenario.get("skipped", ()) else "not run"
            cells = [title, why, *(["–"] * (len(COLUMNS) - 2))]
        else:
            cells = [
                title,
                _num(run.get("wall_s"), 2),
                _num(run.get("requests"), 0),
                _num(run.get("rows"), 0),
                _num(run.get("rows_per_s"), 0),
                _num(run.get("peak_rss_mb"), 0),
                _num(run.get("sim_peak_rss_mb"), 0),
                _num(run.get("cpu_s"), 1),
                _num(run.get("sim_cpu_s"), 1),
                _pct(run.get("share_of_full_requests")),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _verdict(ok: bool | str | None) -> str:
    if isinstance(ok, str):
        return ok
    return {True: "**pass**", False: "**FAIL**", None: "not measured"}[ok]


def targets(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every target of the issue, evaluated on what this run measured."""
    out: list[dict[str, Any]] = []

    def add(target: str, where: str, measured: str, ok: bool | str | None) -> None:
        out.append({"target": target, "scenario": where, "measured": measured, "ok": ok})

    for s in scenarios:
        where = f"{s['devices']:,} / {s['profile']}"
        r = s.get("ratios", {})
        if s["profile"] == "latency":
            v = r.get("full_vs_io_floor")
            add("full load ≤ 1.3× I/O floor (50 ms)", where, _x(v), None if v is None else v <= 1.3)
        if s["profile"] == "none":
            v = r.get("rows_per_s_vs_duckdb_floor")
            add(
                "rows/s vs DuckDB floor (0 ms, reported)",
                where,
                f"{_pct(v)} end to end, {_pct(load_stage_share(s))} normalize + load",
                "reported",
            )
        v = r.get("generic_full_vs_ours")
        bound = dlt_floor_bound(s)
        add(
            "≥ 5× faster than generic, full load",
            where,
            _x(v) + (f" (at most {_x(bound)}: the dlt floor)" if bound and bound < 5 else ""),
            None if v is None else v >= 5,
        )
        v = r.get("generic_nightly_vs_ours")
        add("never slower than generic, nightly", where, _x(v), None if v is None else v >= 1)
        checks = [s.get("checks", {}).get(k) for k in ("rows_after_full", "rows_after_nightly")]
        same = [all(t.get("same") for t in c.values()) for c in checks if c]
        add(
            "same rows as generic (4 tables)",
            where,
            f"{sum(same)}/{len(same)} comparisons equal",
            all(same) if same else None,
        )
        v = r.get("nightly_request_share")
        add("nightly ≤ 5 % of full-load requests", where, _pct(v), None if v is None else v <= 0.05)
        night = nightfloor.summary(s)
        if night is not None:
            add(
                "nightly at its floor (what the day's changes need; reported)",
                where,
                f"{night['nightly']:,} requests, floor {night['floor']:,} "
                f"({_pct(night['floor_share'])} of the full load)",
                "reported",
            )
        diff = s.get("checks", {}).get("io_floor_routes_differ")
        if diff is not None and not s["checks"].get("io_floor_routes_comparable", True):
            add(
                "I/O floor fetched the pipeline's requests per route (check)",
                where,
                "429 retries are in the per-route counts",
                "not comparable",
            )
        elif diff is not None:
            retried = floor_retries_explain(s)
            add(
                "I/O floor fetched the pipeline's requests per route (check)",
                where,
                "identical"
                if not diff
                else f"identical but for {retried} request(s) the floor sent again"
                if retried
                else f"{len(diff)} routes differ",
                not diff or bool(retried),
            )
        if s["devices"] == 100_000:
            full = s["runs"].get("pipeline_full", {})
            rss = full.get("peak_rss_mb")
            add(
                "peak RSS < 1.5 GB, full load",
                where,
                f"{_num(rss, 0)} MB",
                None if rss is None else rss < 1536,
            )
            models = s["runs"].get("models", {}).get("wall_s")
            add(
                "models < 5 s",
                where,
                f"{_num(models, 2)} s",
                None if models is None else models < 5,
            )
    for profile, growth in scaling(scenarios).items():
        for step in growth:
            worst = max(step["growth"].values(), default=None)
            # Linear in the work to do: the fleet, or the rows when the data grew faster.
            scale = max(step["fleet"], step.get("rows") or 0)
            add(
                "no figure grows faster than linearly (full load)",
                f"{step['from']:,} → {step['to']:,} / {profile}",
                f"worst figure {_x(worst)} vs fleet {_x(step['fleet'])}, rows {_x(step.get('rows'))}",
                None if worst is None else worst <= scale * GROWTH_TOLERANCE,
            )
    return out


def floor_retries_explain(scenario: dict[str, Any]) -> int:
    """The floor's retries, when they are exactly its extra requests on the routes that differ.

    The simulator counts every request it answered, so a request the floor sent again after a
    dropped connection shows as one more on its route; 0 when that does not explain the diff.
    """
    diff = scenario.get("checks", {}).get("io_floor_routes_differ") or {}
    floor = scenario["runs"].get("io_floor", {})
    retries = int((floor.get("inner") or {}).get("retries") or 0)
    extra = [counts["floor"] - counts["pipeline"] for counts in diff.values()]
    return retries if extra and all(e > 0 for e in extra) and sum(extra) == retries else 0


def dlt_floor_bound(scenario: dict[str, Any]) -> float | None:
    """The most any dlt pipeline can beat the generic full load by: generic ÷ the dlt floor."""
    runs = scenario["runs"]
    generic = runs.get("generic_full", {}).get("wall_s")
    floor = runs.get("dlt_floor", {}).get("wall_s")
    return generic / floor if generic and floor else None


def scaling(scenarios: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per profile, the growth of each full-load figure between consecutive fleet sizes."""
    by_profile: dict[str, list[dict[str, Any]]] = {}
    for s in scenarios:
        by_profile.setdefault(s["profile"], []).append(s)
    out: dict[str, list[dict[str, Any]]] = {}
    for profile, items in by_profile.items():
        items = sorted(items, key=lambda s: s["devices"])
        steps = []
        for a, b in itertools.pairwise(items):
            fa, fb = a["runs"].get("pipeline_full"), b["runs"].get("pipeline_full")
            if not fa or not fb:
                continue
            growth = {
                k: fb[k] / fa[k] for k in GROWTH_FIGURES if fa.get(k) and fb.get(k) is not None
            }
            steps.append(
                {
                    "from": a["devices"],
                    "to": b["devices"],
                    "fleet": b["devices"] / a["devices"],
                    # the data the simulator serves need not grow exactly with the fleet
                    "rows": fb["rows"] / fa["rows"] if fa.get("rows") and fb.get("rows") else None,
                    "growth": growth,
                }
            )
        if steps:
            out[profile] = steps
    return out


def load_stage_share(scenario: dict[str, Any]) -> float | None:
    """Rows/s of the full load's normalize + load stages as a share of the DuckDB floor."""
    full = scenario["runs"].get("pipeline_full") or {}
    floor = scenario["runs"].get("duckdb_floor") or {}
    stages = full.get("stages_s") or {}
    seconds = (stages.get("normalize") or 0) + (stages.get("load") or 0)
    if not seconds or not full.get("rows") or not floor.get("rows_per_s"):
        return None
    return full["rows"] / seconds / floor["rows_per_s"]


def rss_projection(scenarios: list[dict[str, Any]], target: int = 100_000) -> list[str]:
    """Full-load peak RSS extrapolated linearly to `target` devices when it was not measured."""
    out: list[str] = []
    by_profile: dict[str, dict[int, float]] = {}
    for s in scenarios:
        rss = (s["runs"].get("pipeline_full") or {}).get("peak_rss_mb")
        if rss:
            by_profile.setdefault(s["profile"], {})[s["devices"]] = rss
    for profile, points in by_profile.items():
        if target in points or len(points) < 2:
            continue
        (n1, r1), (n2, r2) = sorted(points.items())[-2:]
        projected = r2 + (r2 - r1) / (n2 - n1) * (target - n2)
        out.append(
            f"- {profile}: full-load peak RSS {r1:,.0f} MB at {n1:,} and {r2:,.0f} MB at {n2:,} "
            f"devices; a straight line through them reaches **{projected:,.0f} MB** at "
            f"{target:,} (a projection, not a measurement; target < 1,536 MB)"
        )
    return [*out, ""] if out else []


def render(results: dict[str, Any]) -> str:
    """The whole README, from the results of one run of the harness."""
    m = results["machine"]
    scenarios = results["scenarios"]
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`); `make bench-quick` runs the 2,000-device",
        "scenarios only; both then build the models on the synthetic 150,000-device warehouse",
        "(`bench/modelbuild.py`, its own section below). Every figure below was measured in the",
        "run(s) dated here; ratios between runs",
        "of the same scenario are the headline, absolute times drift between machines. Raw results:",
        "`bench/results/*.json` (not committed). How the harness works: `bench/__init__.py`,",
        "`bench/scenarios.py`.",
        "",
        f"- **Date**: {results['date']}  (command: `{results['command']}`, "
        f"wall {results['wall_s']:.0f} s)",
        f"- **Machine**: {m['cpu_model']}, {m['logical_cores']} logical cores "
        f"({m['physical_cores']} physical), {m['memory_gb']} GB RAM, {m['os']}",
        f"- **Versions**: Python {m['python']}, dlt {m['dlt']}, duckdb {m['duckdb']}, "
        f"httpx {m['httpx']}, pyarrow {m['pyarrow']}, polars {m['polars']}",
        f"- **Code measured**: commit {m.get('code', 'unknown')}",
        f"- **Simulator**: seed {results['seed']}, its own process on 127.0.0.1; "
        "requests counted by its `/_sim/stats`.",
        "",
        "## Targets",
        "",
        "| target | scenario | measured | verdict |",
        "|---|---|---|---|",
    ]
    for t in targets(scenarios):
        lines.append(f"| {t['target']} | {t['scenario']} | {t['measured']} | {_verdict(t['ok'])} |")
    lines += ["", "## Scenarios", ""]
    lines += [
        "Columns: wall time; requests the simulator served; rows loaded (this pipeline: its own",
        "`_esper_runs.rows`; generic: dlt's normalize row counts; DuckDB floor: rows written);",
        "rows/s = rows / wall; peak RSS = kernel high-water mark (`wait4` `ru_maxrss`) of the",
        "measured process; the simulator's RSS (sampled every 50 ms) and CPU over the same window;",
        "nightly requests as a share of the same tool's full load.",
        "",
    ]
    for s in scenarios:
        lines.append(f"### {s['devices']:,} devices — {s['profile_title']}")
        lines.append("")
        lines += scenario_table(s)
        stages = [
            (label, s["runs"][label].get("stages_s"))
            for label in (
                "pipeline_full",
                "pipeline_nightly",
                "pipeline_full_4",
                "pipeline_nightly_4",
            )
            if s["runs"].get(label, {}).get("stages_s")
        ]
        if stages:
            names = list(stages[0][1])
            lines += ["", "Where this pipeline's wall time went (s, from its log lines):", ""]
            lines.append("| run | " + " | ".join(names) + " |")
            lines.append("|" + "---|" * (len(names) + 1))
            for label, st in stages:
                lines.append(f"| {label} | " + " | ".join(_num(st.get(n), 2) for n in names) + " |")
            lines.append("")
        r = s.get("ratios", {})
        lines += [
            "",
            f"- full load / I/O floor: **{_x(r.get('full_vs_io_floor'))}** "
            f"(floor concurrency {s['settings']['max_concurrency']} threads)",
            f"- full-load rows/s as a share of the DuckDB floor: "
            f"**{_pct(r.get('rows_per_s_vs_duckdb_floor'))}** end to end; "
            f"**{_pct(load_stage_share(s))}** for the normalize + load stages alone",
            f"- generic / this pipeline, full load: **{_x(r.get('generic_full_vs_ours'))}**; "
            f"nightly: **{_x(r.get('generic_nightly_vs_ours'))}**",
            f"- generic full load / dlt floor: {_x(dlt_floor_bound(s))} (no dlt pipeline can "
            "beat the generic by more: both pay the floor on every run)",
            f"- nightly requests / full-load requests: **{_pct(r.get('nightly_request_share'))}**",
        ]
        changed = s["runs"].get("pipeline_nightly", {}).get("changed_devices")
        if changed:
            lines.append(
                f"- devices the simulated day changed (`updated_at` after the full load's API "
                f"time): {changed['changed']:,} of {changed['devices']:,} "
                f"(**{_pct(changed['share'])}**; the nightly target assumes about 2 %)"
            )
        if changed and changed.get("active") is not None:
            lines.append(
                f"- devices with any activity that day (changed, or a command status or "
                f"operation row moved; the nightly reads each one's event feed): "
                f"{changed['active']:,} (**{_pct(changed['active_share'])}**)"
            )
        lines += nightfloor.lines(s)
        diff = s.get("checks", {}).get("io_floor_routes_differ")
        if diff and not s["checks"].get("io_floor_routes_comparable", True):
            lines.append(
                "- I/O floor vs pipeline per route: not comparable here (the counts include "
                "requests answered 429 and retried; statuses: pipeline "
                f"{s['runs'].get('pipeline_full', {}).get('statuses')}, floor "
                f"{s['runs'].get('io_floor', {}).get('statuses')})"
            )
        elif diff:
            retried = floor_retries_explain(s)
            lines.append(
                "- I/O floor vs pipeline, routes whose request counts differ"
                + (
                    f" (the floor sent {retried} request(s) again after an error):"
                    if retried
                    else ":"
                )
            )
            for route, counts in list(diff.items())[:15]:
                lines.append(
                    f"  - `{route}`: pipeline {counts['pipeline']}, floor {counts['floor']}"
                )
            if len(diff) > 15:
                lines.append(f"  - … and {len(diff) - 15} more (see the JSON)")
        elif diff is not None:
            lines.append("- I/O floor fetched exactly the pipeline's requests on every route.")
        for key, title in (("rows_after_full", "full"), ("rows_after_nightly", "nightly")):
            cmp = s.get("checks", {}).get(key)
            if not cmp:
                continue
            parts = []
            for table, c in cmp.items():
                if "error" in c:
                    parts.append(f"{table}: error ({c['error'][:80]})")
                else:
                    parts.append(
                        f"{table} {c['ours']:,} vs {c['generic']:,}"
                        + (
                            ""
                            if c["same"]
                            else f" (only ours {c['only_ours']}, only generic "
                            f"{c['only_generic']}, updated_at differs {c['updated_at_differs']}, "
                            f"duplicate keys {c['duplicate_keys_ours']})"
                        )
                    )
            lines.append(f"- rows vs generic after the {title} load: " + "; ".join(parts))
        loads = [value for _, value in s.get("loadavg", [])]
        if loads:
            lines.append(
                f"- machine load (1-min load average after each step, {m['logical_cores']} cores): "
                f"{min(loads):.1f} – {max(loads):.1f}"
                + (
                    "  ⚠ other work shared the CPUs: absolute times are inflated"
                    if max(loads) > (m["logical_cores"] or 1)
                    else ""
                )
            )
        if s.get("errors"):
            lines.append("- **errors**:")
            for err in s["errors"]:
                lines.append(f"  - {err.splitlines()[0][:300]}")
        lines.append("")
    growth = scaling(scenarios)
    if growth:
        lines += ["## Scaling of the full load", ""]
        lines += [
            "Growth of each full-load figure between two fleet sizes, next to the growth of the",
            "fleet and of the rows loaded (the simulator's data per device differs a little",
            "with fleet size); a figure passes when it grows no faster than the larger of the two.",
            "",
            "| profile | sizes | fleet × | rows × | " + " | ".join(GROWTH_FIGURES) + " |",
        ]
        lines += ["|" + "---|" * (4 + len(GROWTH_FIGURES))]
        for profile, steps in growth.items():
            for st in steps:
                cells = [_x(st["growth"].get(k)) for k in GROWTH_FIGURES]
                lines.append(
                    f"| {profile} | {st['from']:,} → {st['to']:,} | {_x(st['fleet'])} | "
                    f"{_x(st.get('rows'))} | " + " | ".join(cells) + " |"
                )
        lines.append("")
        lines += rss_projection(scenarios)
    lines += [
        "## What is compared",
        "",
        "- **I/O floor** (`bench/iofloor.py`): plain httpx, a pool of as many threads as the",
        "  pipeline's maximum concurrency; devices cursor pages in sequence, per-device apps and event",
        "  feeds fanned out, offset lists for the rest; bodies parsed only for ids and next links.",
        "  Its per-route request counts (from `/_sim/stats`) are checked against the pipeline's.",
        "- **DuckDB floor** (`bench/warehouse.py`): the raw tables of the loaded warehouse as Arrow,",
        "  written into a fresh DuckDB file with `CREATE TABLE AS`; only the writing is timed.",
        "- **Generic alternative** (`bench/generic.py`): dlt's `rest_api_source` with a declarative",
        "  `RESTAPIConfig` (bearer auth, cursor/JSON-link paginators, `content.results`, merge on `id`,",
        "  incremental on `updated_at`), dlt defaults otherwise, for devices, command requests, command",
        "  statuses (child resource, `request={resources.command_requests.id}`) and operations, page size 1000. It is",
        "  compared with this pipeline run on the same four resources (`run --resources …`, its own",
        "  warehouse): on time, and on rows (same keys, same `updated_at`, no duplicate keys).",
        "- **dlt floor** (`bench/dltfloor.py`): a default dlt pipeline loading one row into a new",
        "  DuckDB file, in a fresh process. Both tools pay it on every run, so no dlt pipeline can be",
        "  faster than the generic by more than generic ÷ floor.",
        "",
    ]
    return "\n".join(lines)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
