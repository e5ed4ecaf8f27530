"""How politely a first load treats a rate-limited tenant: `python -m bench.polite`.

A token bucket of the bench's own (not the simulator's rate-limit fault, which the client was
written against) stands in front of the simulator as a reverse proxy on loopback: `rate` tokens
a second (a rate that may change during the run), room for one second of them, and a 429 beyond
it (with `Retry-After: 1`, or without). It can also refuse a share of the requests whatever their
pace (the tenant's "weather": other clients spending the same limit; 429 with `Retry-After` as
seconds or as an HTTP date) and answer a share 503. A first load runs through it, in this
process, and the proxy counts what the tenant's operator would see: requests, 429s, and the
answered rate over the time requests were being sent, as a share of the allowed rate.

`--scenarios` runs those of bench/README.md "Polite client" side by side: the token buckets,
a neighbour refusing one request in five for the first 30 s, weather for the whole run, a
limit that drops (50 -> 10/s) or rises (10 -> 50/s) mid-run, a load shedder, refusals at
random, and each path refused once (a first load, and a nightly after a quiet first load).

`--before` runs the same loads with the client's pacer switched off (every request sent as soon
as a concurrency slot is free, as before the pacer existed), for the comparison in
bench/README.md "Polite client".
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from collections.abc import Callable
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

API_KEY = "bench-polite-key-0123456789"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


class TokenBucketProxy:
    """A reverse proxy on 127.0.0.1 that lets `rate` requests a second through to `upstream`."""

    def __init__(
        self,
        upstream: str,
        rate: float | Callable[[float], float],
        retry_after: bool,
        weather: Callable[[float], float] = lambda t: 0.0,
        unavailable: float = 0.0,
        shed: tuple[float, float] | None = None,
        seed: int = 7,
    ) -> None:
        self.rate_at = rate if callable(rate) else (lambda t, r=rate: r)
        self.rate, self.retry_after = self.rate_at(0.0), retry_after
        self.weather, self.unavailable = weather, unavailable
        self.shed = shed  # (N, share): that share refused while more than N came in 1 s
        self.once = False  # each path (without its query) refused the first time it is asked
        self.asked: set[str] = set()
        self.recent: list[float] = []
        self.tokens, self.filled_at = self.rate, time.monotonic()
        self.lock = threading.Lock()
        self.requests = self.refused = 0
        self.first = self.last = 0.0
        self.log: list[tuple[float, str]] = []  # (seconds since the first request, answer)
        self.rng = random.Random(seed)  # which requests the weather and the shedder refuse
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(upstream))
        local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                answer = proxy.take(urlsplit(self.path).path)
                if answer == "503":
                    self._send(503, b'{"message": "Service Unavailable"}', {})
                    return
                if answer != "ok":
                    headers = {}
                    if proxy.retry_after:
                        headers["Retry-After"] = "1"
                        if answer == "weather" and proxy.rng.random() < 0.5:  # as an HTTP date
                            now = time.time()
                            headers["Date"] = formatdate(now, usegmt=True)
                            headers["Retry-After"] = formatdate(now + 1, usegmt=True)
                    self._send(429, b'{"message": "Rate limit exceeded"}', headers)
                    return
                if not hasattr(local, "client"):
                    local.client = httpx.Client(timeout=60)
                answer = local.client.request(
                    self.command,
                    origin + self.path,
                    content=body,
                    headers={
                        k: v for k, v in self.headers.items() if k.lower() != "content-length"
                    },
                )
                self._send(answer.status_code, answer.content, {"Date": answer.headers["Date"]})

            def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                self.send_response_only(status)
                self.send_header("Content-Type", "application/json")
                if "Date" not in headers:
                    self.send_header("Date", formatdate(time.time(), usegmt=True))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, path: str = "") -> str:
        """How a request to `path` is answered: "ok" (a token), "429" (none left), "weather"
        (a 429 whatever the pace, or a path's first request under `once`) or "503"; counts and
        logs every request."""
        with self.lock:
            now = time.monotonic()
            self.requests += 1
            self.first = self.first or now
            self.last = now
            elapsed = now - self.first
            self.rate = self.rate_at(elapsed)
            self.tokens = min(self.rate, self.tokens + (now - self.filled_at) * self.rate)
            self.filled_at = now
            self.recent = [t for t in self.recent if t > now - 1.0] + [now]
            shedding = self.shed is not None and len(self.recent) > self.shed[0]
            new_path = self.once and path not in self.asked
            self.asked.add(path)
            if self.rng.random() < self.weather(elapsed) or new_path:
                answer = "weather"
            elif self.tokens < 1 or (shedding and self.rng.random() < self.shed[1]):  # type: ignore[index]
                answer = "429"
            else:
                self.tokens -= 1
                answer = "503" if self.rng.random() < self.unavailable else "ok"
            if answer in ("429", "weather"):
                self.refused += 1
            self.log.append((elapsed, answer))
            return answer

    def between(self, start: float, end: float) -> dict[str, float]:
        """The answered rate and the refused share of the requests sent in [start, end)."""
        with self.lock:
            window = [answer for at, answer in self.log if start <= at < end]
        ok = window.count("ok")
        return {
            "answered_per_s": ok / max(end - start, 1e-9),
            "refused_share": window.count("429") / max(len(window), 1),
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def first_load(
    devices: int,
    rate: float | Callable[[float], float],
    retry_after: bool,
    latency_ms: float,
    weather: Callable[[float], float] = lambda t: 0.0,
    unavailable: float = 0.0,
    shed: tuple[float, float] | None = None,
    seed: int = 7,
    once: bool = False,
    nightly: bool = False,
) -> dict[str, Any]:
    """One first load through the proxy; what the proxy counted. `seed`: the proxy's draws;
    `once`: each path refused the first time it is asked; `nightly`: the load measured is the
    nightly a day after a first load (through the proxy with no fault: nothing refused)."""
    from esper_warehouse.pipelines.run.runner import RunSettings, run
    from esper_warehouse.simulator import Simulator

    with Simulator(
        devices=devices, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID, latency_ms=latency_ms
    ) as sim:
        proxy = TokenBucketProxy(sim.base_url, rate, retry_after, weather, unavailable, shed, seed)
        base = proxy.url + urlsplit(sim.base_url).path
        with tempfile.TemporaryDirectory() as folder:
            settings = RunSettings(
                warehouse=Path(folder) / "polite.duckdb",
                build_models=False,
                source_options={
                    "base_url": base,
                    "api_key": API_KEY,
                    "enterprise_id": ENTERPRISE_ID,
                },
            )
            if nightly:
                faults = proxy.rate_at, proxy.weather, proxy.unavailable, proxy.shed
                proxy.rate_at, proxy.weather = (lambda t: NO_LIMIT), (lambda t: 0.0)
                proxy.unavailable, proxy.shed = 0.0, None
                run(settings)
                sim.advance(hours=24)
                proxy.rate_at, proxy.weather, proxy.unavailable, proxy.shed = faults
                with proxy.lock:
                    proxy.requests = proxy.refused = 0
                    proxy.first = proxy.last = 0.0
                    proxy.log.clear()
                    proxy.asked.clear()
            proxy.once = once
            started = time.monotonic()
            result = run(settings)
            wall = time.monotonic() - started
        proxy.close()
    answered = sum(1 for _, answer in proxy.log if answer == "ok")
    sending = max(proxy.last - proxy.first, 1e-9)
    return {
        "rate": proxy.rate_at(0.0),
        "retry_after": retry_after,
        "exit_code": result.exit_code,
        "requests": proxy.requests,
        "refused": proxy.refused,
        "refused_share": proxy.refused / proxy.requests,
        "answered": answered,
        "answered_per_s": answered / sending,
        "share_of_rate": answered / sending / proxy.rate_at(0.0),
        "seconds": wall,
        "sending_s": sending,
        "proxy": proxy,
    }


NO_LIMIT = 100_000.0  # a bucket no first load empties


def scenarios(devices: int, latency_ms: float, only: str = "") -> list[dict[str, Any]]:
    """The scenarios of issues 31, 42 and 54, side by side in one run; one row each, with its
    target. `only`: the scenarios whose number starts with one of these (comma-separated)."""
    rows: list[dict[str, Any]] = []
    wanted = [w for w in only.split(",") if w]

    def chosen(number: str) -> bool:
        return not wanted or any(number.startswith(w) for w in wanted)

    def row(name: str, figure: str, target: str, met: bool, got: dict[str, Any]) -> None:
        rows.append({"scenario": name, "figure": figure, "target": target, "met": met,
                     "exit_code": got["exit_code"], "requests": got["requests"],
                     "refused": got["refused"]})  # fmt: skip
        print(f"| {name} | {figure} | {target} | {'yes' if met else '**no**'} |", flush=True)

    print("| scenario | measured | target | met |\n|---|---|---|---|", flush=True)
    if chosen("5"):
        for seed_run in range(3):  # "not every run": the first refusals' timing varies
            got = first_load(devices, NO_LIMIT, True, latency_ms, shed=(10.0, 0.2),
                             seed=7 + seed_run)  # fmt: skip
            sending = got["requests"] / got["sending_s"]
            row(f"5. shedder: 1 in 5 refused while more than 10/s come (run {seed_run + 1}, "
                f"seed {7 + seed_run})",
                f"{sending:.1f} sent/s, {got['refused_share']:.1%} refused",
                "<= 15 sent/s, <= 10 % refused",
                sending <= 15 and got["refused_share"] <= 0.1, got)  # fmt: skip
    if chosen("6"):
        quiet = first_load(devices, NO_LIMIT, True, latency_ms)
        for seed_run in range(3):  # each run its own draws: one seed's opening is one case
            got = first_load(devices, NO_LIMIT, True, latency_ms, weather=lambda t: 0.14,
                             seed=7 + seed_run)  # fmt: skip
            ratio = got["seconds"] / quiet["seconds"]
            row(f"6. 14 % refused at random, no limit (run {seed_run + 1}, seed {7 + seed_run})",
                f"{got['seconds']:.1f} s vs {quiet['seconds']:.1f} s quiet ({ratio:.1f}x)",
                "<= 2x the quiet load", ratio <= 2, got)  # fmt: skip
    if chosen("7"):
        for nightly in (False, True):
            load = "nightly" if nightly else "first load"
            quiet = first_load(devices, NO_LIMIT, True, latency_ms, nightly=nightly)
            got = first_load(devices, NO_LIMIT, True, latency_ms, once=True, nightly=nightly)
            ratio = got["seconds"] / quiet["seconds"]
            row(f"7. each path refused once (429, Retry-After 1 s), no limit, {load}",
                f"{got['seconds']:.1f} s vs {quiet['seconds']:.1f} s quiet ({ratio:.1f}x), "
                f"{got['refused_share']:.0%} refused",
                "<= 2x the quiet load", ratio <= 2, got)  # fmt: skip
    if not chosen("1") and not chosen("2") and not chosen("3") and not chosen("4"):
        return rows
    for rate in (10.0, 20.0, 50.0):
        for retry_after in (True, False):
            got = first_load(devices, rate, retry_after, latency_ms)
            ok = got["refused_share"] <= 0.05 and got["share_of_rate"] >= 0.85
            row(f"1. bucket {rate:g}/s, Retry-After {'1 s' if retry_after else 'none'}",
                f"{got['refused_share']:.1%} refused, {got['share_of_rate']:.0%} of the rate",
                "<= 5 % refused, >= 85 % of the rate", ok, got)  # fmt: skip
    big = devices * 3  # long enough that 30 s of a neighbour is a part of the load, not all
    alone = first_load(big, 25.0, True, latency_ms)
    neighbour = first_load(big, 25.0, True, latency_ms, weather=lambda t: 0.2 if t < 30 else 0.0)
    ratio = neighbour["seconds"] / alone["seconds"]
    row("2. bucket 25/s, 1 in 5 refused for the first 30 s",
        f"{neighbour['seconds']:.0f} s vs {alone['seconds']:.0f} s alone ({ratio:.2f}x)",
        "<= 1.3x the load alone", ratio <= 1.3, neighbour)  # fmt: skip
    weather = first_load(big, 25.0, True, latency_ms, weather=lambda t: 1 / 7, unavailable=1 / 11)
    share = alone["seconds"] / weather["seconds"]
    row("3. bucket 25/s, 1 in 7 refused (429, Retry-After s or date), 1 in 11 503, all run",
        f"{weather['seconds']:.0f} s vs {alone['seconds']:.0f} s without them: {share:.0%} of "
        f"the pace; {weather['answered_per_s']:.1f} answered/s of 25",
        ">= 60 % of the pace", share >= 0.6, weather)  # fmt: skip
    drop = first_load(big, lambda t: 50.0 if t < 30 else 10.0, True, latency_ms)
    after = drop["proxy"].between(60, drop["sending_s"])
    row("4a. bucket 50/s, 10/s from 30 s", f"{after['refused_share']:.1%} refused from 60 s",
        "<= 5 % refused from 30 s after the drop", after["refused_share"] <= 0.05, drop)  # fmt: skip
    rise = first_load(big * 2, lambda t: 10.0 if t < 30 else 50.0, True, latency_ms)
    end = min(rise["sending_s"], 90.0)
    reached = rise["proxy"].between(end - 10, end)["answered_per_s"]
    row("4b. bucket 10/s, 50/s from 30 s", f"{reached:.1f} answered/s at {end - 10:.0f}-{end:.0f} s",
        ">= 85 % of 50/s within 60 s", reached >= 0.85 * 50, rise)  # fmt: skip
    return rows


def _pacer_off() -> None:
    """The client as it was before the pacer: no pace, 429s only lower the concurrency."""
    from esper_warehouse.sources.esper.http import pacing

    pacing.RatePacer.reserve = lambda self: 0.0  # type: ignore[method-assign]
    pacing.RatePacer.cuts_pace = lambda self, throttled, reserved_at=None, retried=False: throttled  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.polite", description=__doc__)
    parser.add_argument("--devices", type=int, default=300)
    parser.add_argument("--rates", default="10,20,50")
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--before", action="store_true", help="switch the client's pacer off")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--scenarios", action="store_true",
                        help="the scenarios of issues 31 (1-4), 42 (5, 6) and 54 (7)")  # fmt: skip
    parser.add_argument("--only", default="",
                        help="with --scenarios: these numbers only, e.g. 5,6 or 4a")  # fmt: skip
    args = parser.parse_args(argv)
    if args.before:
        _pacer_off()
    import logging

    logging.getLogger("esper_warehouse").setLevel(logging.ERROR)
    if args.scenarios:
        rows = scenarios(args.devices, args.latency_ms, args.only)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return 0 if all(r["met"] and r["exit_code"] in (0, 6) for r in rows) else 1
    results = []
    print("| rate limit | Retry-After | requests | 429s | 429 share | answered/s | share of rate |")
    print("|---|---|---|---|---|---|---|")
    for rate in (float(r) for r in args.rates.split(",")):
        for retry_after in (True, False):
            got = first_load(args.devices, rate, retry_after, args.latency_ms)
            got.pop("proxy")
            results.append(got)
            print(
                f"| {rate:g}/s | {'1 s' if retry_after else 'none'} | {got['requests']:,} | "
                f"{got['refused']:,} | {got['refused_share']:.1%} | {got['answered_per_s']:.1f} | "
                f"{got['share_of_rate']:.0%} |" + ("" if got["exit_code"] == 0 else " (failed)"),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["exit_code"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
