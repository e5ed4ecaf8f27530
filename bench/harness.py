"""Processes under measurement: the simulator (its own process) and each measured command.

Every process started here runs in its own session (process group) and is recorded, so that
`stop_all()` (called from a `finally` and from `atexit`) ends each of them by its own group id even
when the benchmark fails half-way. Waits are bounded in time; the simulator only listens on
127.0.0.1.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
_STARTED: list[subprocess.Popen[bytes]] = []
_LOCK = threading.Lock()


def _register(proc: subprocess.Popen[bytes]) -> None:
    with _LOCK:
        _STARTED.append(proc)


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Stop one process started here, and its group, by id: TERM, then KILL after `grace_s`."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def stop_all() -> None:
    """Stop every process this module started that is still running."""
    with _LOCK:
        procs = list(_STARTED)
        _STARTED.clear()
    for proc in procs:
        _kill_group(proc)


atexit.register(stop_all)


@dataclass
class Measurement:
    """What one measured command cost.

    `peak_rss_mb` is the kernel's high-water mark (wait4 `ru_maxrss`) of the process or of its
    largest reaped descendant; `peak_tree_rss_mb` the largest sampled sum over the process tree.
    `sim_*` are the simulator's figures over the same window (RSS sampled, CPU as a delta).
    """

    label: str
    command: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    peak_tree_rss_mb: float
    sim_peak_rss_mb: float | None
    sim_cpu_s: float | None
    timed_out: bool
    log: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


def _tree_rss(pid: int) -> int:
    """Sum of RSS over a process and its descendants (bytes); 0 once it is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


class _Sampler(threading.Thread):
    """Polls RSS of the measured tree and of the simulator until stopped."""

    def __init__(self, pid: int, sim_pid: int | None, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.sim_pid, self.interval_s = pid, sim_pid, interval_s
        self.peak = 0
        self.sim_peak = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, _tree_rss(self.pid))
            if self.sim_pid is not None:
                self.sim_peak = max(self.sim_peak, _tree_rss(self.sim_pid))
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


def _cpu_of(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def measure(
    label: str,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    log_path: Path,
    timeout_s: float,
    sim_pid: int | None = None,
    cwd: Path = REPO,
) -> Measurement:
    """Run `command` to completion (or `timeout_s`) and measure wall, CPU and peak memory.

    The child's output goes to `log_path`. CPU seconds and the RSS high-water mark come from
    `os.wait4` on that very child (so other processes, the simulator included, are not counted);
    tree RSS and the simulator's RSS are sampled every 50 ms.
    """
    full_env = {**os.environ, **(env or {})}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sim_cpu_before = _cpu_of(sim_pid)
    with log_path.open("wb") as log:
        started_epoch = time.time()
        started = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _register(proc)
        sampler = _Sampler(proc.pid, sim_pid)
        sampler.start()
        timed_out = False
        deadline = started + timeout_s
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if any
    sim_cpu_after = _cpu_of(sim_pid)
    sim_cpu = (
        sim_cpu_after - sim_cpu_before
        if sim_cpu_before is not None and sim_cpu_after is not None
        else None
    )
    assert usage is not None
    return Measurement(
        label=label,
        command=command,
        returncode=proc.returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # Linux reports KiB
        peak_tree_rss_mb=sampler.peak / 2**20,
        sim_peak_rss_mb=sampler.sim_peak / 2**20 if sim_pid is not None else None,
        sim_cpu_s=sim_cpu,
        timed_out=timed_out,
        log=str(log_path),
        extra={"started_epoch": started_epoch, "ended_epoch": started_epoch + wall},
    )


def log_tail(path: str | Path, lines: int = 30) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class SimulatorProcess:
    """The simulator in its own process, driven over HTTP (`/_sim/...`) on 127.0.0.1.

    Use as a context manager; the process is stopped on exit, whatever happened.
    """

    def __init__(
        self,
        *,
        devices: int,
        seed: int,
        api_key: str,
        enterprise_id: str,
        latency_ms: float,
        rate_limit: float | None,
        log_path: Path,
        start_timeout_s: float = 900.0,
    ) -> None:
        self.devices, self.seed = devices, seed
        self.api_key, self.enterprise_id = api_key, enterprise_id
        self.latency_ms, self.rate_limit = latency_ms, rate_limit
        self.log_path, self.start_timeout_s = log_path, start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.startup_s = 0.0
        self._http: httpx.Client | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def root(self) -> str:
        """Origin of the server (`http://127.0.0.1:PORT`): `/_sim/` lives there."""
        return self.base_url.rsplit("/api", 1)[0]

    def __enter__(self) -> SimulatorProcess:
        command = [
            PYTHON,
            "-m",
            "bench.simserver",
            f"--devices={self.devices}",
            f"--seed={self.seed}",
            f"--enterprise-id={self.enterprise_id}",
            f"--latency-ms={self.latency_ms}",
        ]
        if self.rate_limit:
            command.append(f"--rate-limit={self.rate_limit}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        self._stderr = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            command,
            cwd=REPO,
            env={**os.environ, "BENCH_API_KEY": self.api_key},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        _register(self.proc)
        try:
            self.base_url = self._read_base_url()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.startup_s = time.perf_counter() - started
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.__exit__(None, None, None)
            raise RuntimeError(f"simulator is not on loopback: {self.base_url}")
        self._http = httpx.Client(base_url=self.root, timeout=600)
        return self

    def _read_base_url(self) -> str:
        """Wait (bounded) for the `BASE_URL` line the server prints once it listens."""
        assert self.proc is not None and self.proc.stdout is not None
        result: list[str] = []

        def reader() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith("BASE_URL "):
                    result.append(line.split(" ", 1)[1])
                    return

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        thread.join(self.start_timeout_s)
        if not result:
            raise RuntimeError(
                f"simulator did not start within {self.start_timeout_s:.0f} s "
                f"(exit code {self.proc.poll()}):\n{log_tail(self.log_path)}"
            )
        return result[0].rstrip("/")

    def __exit__(self, *exc: object) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            _kill_group(self.proc)
        with contextlib.suppress(Exception):
            self._stderr.close()

    # --- control over HTTP -------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self._http is not None, "simulator not started"
        response = self._http.request(method, path, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def advance(self, hours: float) -> None:
        """Move the simulated fleet on by `hours`."""
        self._call("POST", "/_sim/advance", params={"hours": hours})

    def stats(self) -> dict[str, Any]:
        """Requests served since the last reset: total, per route, per status."""
        return self._call("GET", "/_sim/stats")

    def reset_stats(self) -> None:
        self._call("POST", "/_sim/stats/reset")

    def set_faults(self, faults: list[dict[str, Any]]) -> None:
        self._call("POST", "/_sim/faults", json=faults)

    def clear_faults(self) -> None:
        self._call("DELETE", "/_sim/faults")

    def now(self) -> Any:
        return self._call("GET", "/_sim/now")

    def peak_rss_mb(self) -> float:
        """Current RSS of the simulator process tree (MB)."""
        return _tree_rss(self.pid) / 2**20 if self.pid else 0.0
