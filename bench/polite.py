"""How politely a first load treats a rate-limited tenant: `python -m bench.polite`.

A token bucket of the bench's own (not the simulator's rate-limit fault, which the client was
written against) stands in front of the simulator as a reverse proxy on loopback: `rate` tokens
a second, room for one second of them, and a 429 beyond it (with `Retry-After: 1`, or without).
A first load of a small fleet runs through it, in this process, and the proxy counts what the
tenant's operator would see: requests, 429s, and the answered rate over the time requests were
being sent, as a share of the allowed rate.

`--before` runs the same loads with the client's pacer switched off (every request sent as soon
as a concurrency slot is free, as before the pacer existed), for the comparison in
bench/README.md "Polite client".
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

API_KEY = "bench-polite-key-0123456789"
ENTERPRISE_ID = "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


class TokenBucketProxy:
    """A reverse proxy on 127.0.0.1 that lets `rate` requests a second through to `upstream`."""

    def __init__(self, upstream: str, rate: float, retry_after: bool) -> None:
        self.rate, self.retry_after = rate, retry_after
        self.tokens, self.filled_at = rate, time.monotonic()
        self.lock = threading.Lock()
        self.requests = self.refused = 0
        self.first = self.last = 0.0
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
                if not proxy.take():
                    headers = {"Retry-After": "1"} if proxy.retry_after else {}
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
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self) -> bool:
        """One token for a request, or False (a 429); counts every request."""
        with self.lock:
            now = time.monotonic()
            self.requests += 1
            self.first = self.first or now
            self.last = now
            self.tokens = min(self.rate, self.tokens + (now - self.filled_at) * self.rate)
            self.filled_at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            self.refused += 1
            return False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def first_load(devices: int, rate: float, retry_after: bool, latency_ms: float) -> dict[str, Any]:
    """One first load through the token bucket; what the proxy counted."""
    from esper_warehouse.pipelines.runner import RunSettings, run
    from esper_warehouse.simulator import Simulator

    with Simulator(
        devices=devices, seed=7, api_key=API_KEY, enterprise_id=ENTERPRISE_ID, latency_ms=latency_ms
    ) as sim:
        proxy = TokenBucketProxy(sim.base_url, rate, retry_after)
        base = proxy.url + urlsplit(sim.base_url).path
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            result = run(
                RunSettings(
                    warehouse=Path(folder) / "polite.duckdb",
                    build_models=False,
                    source_options={
                        "base_url": base,
                        "api_key": API_KEY,
                        "enterprise_id": ENTERPRISE_ID,
                    },
                )
            )
            wall = time.monotonic() - started
        proxy.close()
    answered = proxy.requests - proxy.refused
    sending = max(proxy.last - proxy.first, 1e-9)
    return {
        "rate": rate,
        "retry_after": retry_after,
        "exit_code": result.exit_code,
        "requests": proxy.requests,
        "refused": proxy.refused,
        "refused_share": proxy.refused / proxy.requests,
        "answered": answered,
        "answered_per_s": answered / sending,
        "share_of_rate": answered / sending / rate,
        "seconds": wall,
    }


def _pacer_off() -> None:
    """The client as it was before the pacer: no pace, 429s only lower the concurrency."""
    from esper_warehouse.sources.esper.http import pacing

    pacing.RatePacer.reserve = lambda self: 0.0  # type: ignore[method-assign]
    pacing.RatePacer.answered = lambda self, throttled, reserved_at=None: None  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.polite", description=__doc__)
    parser.add_argument("--devices", type=int, default=300)
    parser.add_argument("--rates", default="10,20,50")
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--before", action="store_true", help="switch the client's pacer off")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.before:
        _pacer_off()
    import logging

    logging.getLogger("esper_warehouse").setLevel(logging.ERROR)
    results = []
    print("| rate limit | Retry-After | requests | 429s | 429 share | answered/s | share of rate |")
    print("|---|---|---|---|---|---|---|")
    for rate in (float(r) for r in args.rates.split(",")):
        for retry_after in (True, False):
            got = first_load(args.devices, rate, retry_after, args.latency_ms)
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
