"""The foreground command: prints its base URL, serves, stops on Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx


def test_simulate_command_serves_and_stops():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "--devices",
            "30",
            "--seed",
            "2",
            "--port",
            "0",
            "--api-key",
            "cli-key",
            "--enterprise-id",
            "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        base = line.split(" at ")[1].strip()
        assert base.startswith("http://127.0.0.1:") and base.endswith("/api")
        resp = httpx.get(f"{base}/v2/devices/", headers={"Authorization": "Bearer cli-key"})
        assert resp.status_code == 200 and resp.json()["content"]["count"] > 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0)
