"""One scenario = one fleet size × one API behaviour, every run side by side on the same simulator.

Order of the runs (the simulated fleet only moves at step 6, so steps 1-5 see the same data):
1. this pipeline, full load into an empty warehouse;
2. the I/O floor (same pages, plain httpx), its per-route requests checked against step 1;
3. the DuckDB floor (step 1's rows, Arrow → `CREATE TABLE AS`);
4. this pipeline restricted to the generic alternative's four resources (`--resources`), full load
   into a second empty warehouse;
5. the generic `rest_api` alternative, full load into its own empty warehouse; its four tables
   compared with step 4's (same keys, same `updated_at`);
6. the dlt floor: a default dlt pipeline loading one row into a new DuckDB file (`bench/dltfloor.py`);
7. `advance(24h)`;
8. this pipeline, nightly load (all resources); 9. the same, four resources;
10. the generic alternative, nightly load; rows compared again;
11. the SQL models on step 1's warehouse.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import re
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench import nightfloor
from bench import warehouse as wh
from bench.generic import TABLES as GENERIC_TABLES
from bench.harness import PYTHON, Measurement, SimulatorProcess, log_tail, measure

API_KEY = "bench-key-0123456789abcdef"  # the simulator's own key; never a real one
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


@dataclass(frozen=True)
class Profile:
    """An API behaviour: added latency per request and an optional token-bucket rate limit."""

    name: str
    latency_ms: float
    rate_limit: float | None
    title: str


def profiles(rate_limit_rps: float) -> dict[str, Profile]:
    """The three API behaviours of the issue, by name."""
    return {
        "none": Profile("none", 0, None, "no added latency"),
        "latency": Profile("latency", 50, None, "50 ms added latency per request"),
        "ratelimit": Profile(
            "ratelimit",
            50,
            rate_limit_rps,
            f"50 ms latency + rate limit {rate_limit_rps:g} req/s (429 + Retry-After)",
        ),
    }


def pipeline_settings() -> dict[str, int]:
    """The pipeline's maximum concurrency and status batch size (its settings, env overrides)."""
    from esper_warehouse.sources.esper.settings import SETTINGS

    found = {}
    for key, name in (
        ("max_concurrency", "max_concurrency"),
        ("status_batch", "status_batch_size"),
    ):
        found[key] = int(os.environ.get(SETTINGS[name].env) or SETTINGS[name].default)
    return found


def pipeline_command(*args: str) -> list[str]:
    """`esper-warehouse …` from the venv's console script (or the module if it is missing)."""
    script = Path(sys.executable).parent / "esper-warehouse"
    if script.exists():
        return [str(script), *args]
    return [PYTHON, "-c", "from esper_warehouse.pipelines.cli import entry; entry()", *args]


_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO esper_warehouse: (.*)$")
_MARKS = (
    ("extract", "extract: started"),
    ("normalize", "normalize: started"),
    ("load", "load: started"),
    ("finish", "load: done"),
)


def pipeline_stages(m: Measurement) -> dict[str, float] | None:
    """Where a pipeline run's wall time went, from its own log lines (best effort).

    `startup` = process start → its first log line (interpreter, imports, configuration);
    `extract`, `normalize`, `load` between the pipeline's stage lines; `finish` = after the load
    (reconciliation, run record, summary) until the process ended.
    """
    stamps: dict[str, float] = {}
    try:
        lines = Path(m.log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        match = _LOG_LINE.match(line)
        if not match:
            continue
        when = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        stamps.setdefault("first", when)
        for name, text in _MARKS:
            if match.group(2).startswith(text):
                stamps.setdefault(name, when)
    if "first" not in stamps:
        return None
    points = [("startup", m.extra["started_epoch"]), ("setup", stamps["first"])]
    points += [(name, stamps[name]) for name, _ in _MARKS if name in stamps]
    points.append(("end", m.extra["ended_epoch"]))
    return {name: max(0.0, nxt - at) for (name, at), (_, nxt) in itertools.pairwise(points)}


def _route_diff(ours: dict[str, int], floor: dict[str, int]) -> dict[str, dict[str, int]]:
    """Routes where the floor's request count differs from the pipeline's."""
    return {
        route: {"pipeline": ours.get(route, 0), "floor": floor.get(route, 0)}
        for route in sorted(set(ours) | set(floor))
        if ours.get(route, 0) != floor.get(route, 0)
    }


class Scenario:
    """Runs and records every measurement of one (fleet size, API behaviour)."""

    def __init__(
        self,
        devices: int,
        profile: Profile,
        work: Path,
        seed: int,
        run_timeout_s: float,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        self.skip = skip
        self.devices, self.profile, self.seed = devices, profile, seed
        self.run_timeout_s = run_timeout_s
        self.work = work / f"{devices}-{profile.name}"
        self.ours = self.work / "warehouse.duckdb"
        self.theirs = self.work / "generic.duckdb"
        self.ours4 = self.work / "warehouse_4_tables.duckdb"
        self.settings = pipeline_settings()
        self.result: dict[str, Any] = {
            "devices": devices,
            "profile": profile.name,
            "profile_title": profile.title,
            "latency_ms": profile.latency_ms,
            "rate_limit_rps": profile.rate_limit,
            "seed": seed,
            "settings": self.settings,
            "runs": {},
            "checks": {},
            "errors": [],
            "skipped": sorted(skip),
            "loadavg": [],  # 1-minute load average after each step: other work on the machine
        }
        self.sim: SimulatorProcess | None = None

    # --- helpers ---------------------------------------------------------------------------------
    def _env(self, dlt_dir: str) -> dict[str, str]:
        assert self.sim is not None
        return {
            "SOURCES__ESPER__API_KEY": API_KEY,
            "SOURCES__ESPER__BASE_URL": self.sim.base_url,
            "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
            "BENCH_API_KEY": API_KEY,
            "DLT_DATA_DIR": str(self.work / dlt_dir),
        }

    def _measure(self, label: str, command: list[str], env: dict[str, str]) -> Measurement:
        assert self.sim is not None
        self.sim.reset_stats()
        m = measure(
            label,
            command,
            env=env,
            log_path=self.work / "logs" / f"{label}.log",
            timeout_s=self.run_timeout_s,
            sim_pid=self.sim.pid,
        )
        stats = self.sim.stats()
        m.extra["sim_stats"] = stats
        m.extra["requests"] = int(stats.get("total", 0))
        if m.returncode != 0 or m.timed_out:
            why = "timed out" if m.timed_out else f"exit code {m.returncode}"
            raise RuntimeError(f"{label}: {why}\n{log_tail(m.log)}")
        return m

    def _record(self, label: str, m: Measurement, **figures: Any) -> dict[str, Any]:
        rows = figures.get("rows")
        record = {
            "label": label,
            "wall_s": m.wall_s,
            "requests": m.extra.get("requests"),
            "rows": rows,
            "rows_per_s": rows / m.wall_s if rows and m.wall_s > 0 else None,
            "peak_rss_mb": m.peak_rss_mb,
            "peak_tree_rss_mb": m.peak_tree_rss_mb,
            "sim_peak_rss_mb": m.sim_peak_rss_mb,
            "cpu_s": m.cpu_s,
            "sim_cpu_s": m.sim_cpu_s,
            "statuses": m.extra.get("sim_stats", {}).get("statuses"),
            "routes": m.extra.get("sim_stats", {}).get("routes"),
            "log": m.log,
            **figures,
        }
        self.result["runs"][label] = record
        return record

    def _step(self, name: str, fn: Any) -> bool:
        """Run one step; a failure is recorded and the scenario goes on where it still can."""
        try:
            fn()
            return True
        except Exception as exc:
            self.result["errors"].append(f"{name}: {exc}")
            print(f"  ! {name} failed: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
            (self.work / "logs").mkdir(parents=True, exist_ok=True)
            (self.work / "logs" / f"{name}.traceback").write_text(traceback.format_exc())
            return False

    def _say(self, text: str) -> None:
        print(f"[{self.devices} devices, {self.profile.name}] {text}", flush=True)

    # --- the runs --------------------------------------------------------------------------------
    def pipeline_run(self, label: str, *, four_tables: bool = False, full: bool = False) -> None:
        """`esper-warehouse run` (all resources, or only the generic alternative's four)."""
        target = self.ours4 if four_tables else self.ours
        args = ["run", "--warehouse", str(target), "--no-models"]
        if four_tables:
            args += ["--resources", ",".join(GENERIC_TABLES)]
        if full:
            args.append("--full")
        before = wh.table_counts(target)
        previous = wh.last_run(target)
        m = self._measure(
            label, pipeline_command(*args), self._env("dlt_ours4" if four_tables else "dlt_ours")
        )
        total, per_table, source = wh.rows_loaded(
            target, before, previous.get("run_id") if previous else None
        )
        record = self._record(label, m, rows=total, rows_per_table=per_table, rows_source=source)
        record["stages_s"] = pipeline_stages(m)
        if not full:
            record["changed_devices"] = wh.changed_devices(target)
        if label == "pipeline_nightly":
            self.result["checks"]["nightly_floor"] = nightfloor.summary(self.result)

    def io_floor(self) -> None:
        assert self.sim is not None
        out = self.work / "io_floor.json"
        command = [
            PYTHON,
            "-m",
            "bench.iofloor",
            f"--base-url={self.sim.base_url}",
            f"--enterprise-id={ENTERPRISE_ID}",
            f"--concurrency={self.settings['max_concurrency']}",
            f"--status-batch={self.settings['status_batch']}",
            f"--out={out}",
        ]
        m = self._measure("io_floor", command, self._env("dlt_floor"))
        inner = orjson.loads(out.read_bytes())
        self._record("io_floor", m, rows=None, inner=inner)
        ours = self.result["runs"].get("pipeline_full", {}).get("routes") or {}
        diff = _route_diff(ours, m.extra["sim_stats"].get("routes") or {})
        self.result["checks"]["io_floor_routes_differ"] = diff
        throttled = [
            (self.result["runs"].get(label, {}).get("statuses") or {}).get("429", 0)
            for label in ("pipeline_full", "io_floor")
        ]
        # per-route counts include retried requests: comparable only without 429s
        self.result["checks"]["io_floor_routes_comparable"] = not any(throttled)

    def duckdb_floor(self) -> None:
        out = self.work / "duckdb_floor.json"
        command = [
            PYTHON,
            "-m",
            "bench.warehouse",
            "floor",
            f"--src={self.ours}",
            f"--dst={self.work / 'floor.duckdb'}",
            f"--out={out}",
        ]
        m = self._measure("duckdb_floor", command, {})
        inner = orjson.loads(out.read_bytes())
        record = self._record("duckdb_floor", m, rows=inner["rows"], inner=inner)
        # the floor's own figure times the writing only (reading the source is not the floor)
        record["wall_s"] = inner["wall_s"]
        record["rows_per_s"] = inner["rows_per_s"]
        record["requests"] = None

    def generic(self, label: str) -> None:
        assert self.sim is not None
        out = self.work / f"{label}.json"
        command = [
            PYTHON,
            "-m",
            "bench.generic",
            f"--base-url={self.sim.base_url}",
            f"--warehouse={self.theirs}",
            f"--pipelines-dir={self.work / 'dlt_generic' / 'pipelines'}",
            f"--out={out}",
        ]
        m = self._measure(label, command, self._env("dlt_generic"))
        inner = orjson.loads(out.read_bytes())
        self._record(label, m, rows=inner["rows"], rows_per_table=inner["row_counts"], inner=inner)

    def dlt_floor(self) -> None:
        command = [
            PYTHON,
            "-m",
            "bench.dltfloor",
            f"--warehouse={self.work / 'dlt_floor.duckdb'}",
            f"--pipelines-dir={self.work / 'dlt_floor' / 'pipelines'}",
        ]
        m = self._measure("dlt_floor", command, {})
        self._record("dlt_floor", m, rows=1)

    def compare(self, label: str) -> None:
        self.result["checks"][label] = wh.compare(self.ours4, self.theirs, GENERIC_TABLES)

    def models(self) -> None:
        m = self._measure(
            "models",
            pipeline_command("models", "--warehouse", str(self.ours)),
            self._env("dlt_ours"),
        )
        self._record("models", m, rows=None)

    def advance(self) -> None:
        assert self.sim is not None
        self.sim.advance(24)

    def run(self) -> dict[str, Any]:
        """Every step of the scenario; the simulator is stopped at the end whatever happens."""
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self._say(f"starting the simulator ({self.profile.title})")
        try:
            with SimulatorProcess(
                devices=self.devices,
                seed=self.seed,
                api_key=API_KEY,
                enterprise_id=ENTERPRISE_ID,
                latency_ms=self.profile.latency_ms,
                rate_limit=self.profile.rate_limit,
                log_path=self.work / "logs" / "esper_warehouse.simulator.log",
            ) as sim:
                self.sim = sim
                self.result["simulator_startup_s"] = sim.startup_s
                steps = [
                    ("pipeline_full", lambda: self.pipeline_run("pipeline_full", full=True)),
                    ("io_floor", self.io_floor),
                    ("duckdb_floor", self.duckdb_floor),
                    (
                        "pipeline_full_4",
                        lambda: self.pipeline_run("pipeline_full_4", four_tables=True, full=True),
                    ),
                    ("generic_full", lambda: self.generic("generic_full")),
                    ("compare_full", lambda: self.compare("rows_after_full")),
                    ("dlt_floor", self.dlt_floor),
                    ("advance", self.advance),
                    ("pipeline_nightly", lambda: self.pipeline_run("pipeline_nightly")),
                    (
                        "pipeline_nightly_4",
                        lambda: self.pipeline_run("pipeline_nightly_4", four_tables=True),
                    ),
                    ("generic_nightly", lambda: self.generic("generic_nightly")),
                    ("compare_nightly", lambda: self.compare("rows_after_nightly")),
                    ("models", self.models),
                ]
                for name, fn in steps:
                    if name in self.skip:
                        continue
                    self._say(name)
                    self._step(name, fn)
                    self.result["loadavg"].append((name, os.getloadavg()[0]))
                self.result["sim_peak_rss_mb"] = sim.peak_rss_mb()
        except Exception as exc:
            self.result["errors"].append(f"simulator: {exc}")
            print(f"  ! simulator: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
        finally:
            self.sim = None
        self._derive()
        return self.result

    def _derive(self) -> None:
        """Ratios between the runs of this scenario."""
        runs = self.result["runs"]

        def fig(label: str, key: str) -> float | None:
            value = runs.get(label, {}).get(key)
            return float(value) if value is not None else None

        def ratio(a: float | None, b: float | None) -> float | None:
            return a / b if a is not None and b not in (None, 0) else None

        full_req = fig("pipeline_full", "requests")
        for label, base in (
            ("pipeline_nightly", "pipeline_full"),
            ("pipeline_nightly_4", "pipeline_full_4"),
            ("generic_nightly", "generic_full"),
        ):
            if label in runs:
                runs[label]["share_of_full_requests"] = ratio(
                    fig(label, "requests"), fig(base, "requests")
                )
        self.result["ratios"] = {
            "full_vs_io_floor": ratio(fig("pipeline_full", "wall_s"), fig("io_floor", "wall_s")),
            "rows_per_s_vs_duckdb_floor": ratio(
                fig("pipeline_full", "rows_per_s"), fig("duckdb_floor", "rows_per_s")
            ),
            "generic_full_vs_ours": ratio(
                fig("generic_full", "wall_s"), fig("pipeline_full_4", "wall_s")
            ),
            "generic_nightly_vs_ours": ratio(
                fig("generic_nightly", "wall_s"), fig("pipeline_nightly_4", "wall_s")
            ),
            "nightly_request_share": ratio(fig("pipeline_nightly", "requests"), full_req),
        }
