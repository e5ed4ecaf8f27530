"""`run --notify URL`: one message per run, through Apprise, to a loopback listener: the outcome,
the changes' counts, the refused routes, never the key; a target that refuses or hangs costs a
few seconds and changes nothing else."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.views import notify

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import ROOT

PIPELINES_REFUSED = [{"kind": "status", "status": 403, "route": "/pipelines/*"}]


class Listener:
    """A loopback HTTP listener that keeps each POST's JSON body and answers `status`."""

    def __init__(self, status: int = 200) -> None:
        self.posts: list[dict[str, Any]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                listener.posts.append(json.loads(self.rfile.read(length)))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def hanging() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def _nightly(sim: Any, wh: Path, *notify_args: str) -> subprocess.CompletedProcess[str]:
    """`esper-warehouse run` (with the models) in a subprocess, as the nightly job runs it."""
    env = {
        **os.environ,
        "SOURCES__ESPER__BASE_URL": sim.base_url,
        "SOURCES__ESPER__API_KEY": API_KEY,
        "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
        "ESPER_WAREHOUSE__LOCK_TIMEOUT_S": "3",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-m", "esper_warehouse.pipelines.cli", "run", "--warehouse", str(wh)]
    return subprocess.run(
        [*argv, *notify_args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_one_message_per_run_with_the_outcome_the_changes_and_the_refusals(
    sim, wh, modelled_first_load, listener
):
    modelled_first_load(wh)
    sim.advance(24)
    sim.set_faults(PIPELINES_REFUSED)
    done = _nightly(sim, wh, "--notify", f"json://127.0.0.1:{listener.port}/")
    assert done.returncode == 6, done.stderr  # partial
    assert len(listener.posts) == 1
    text = listener.posts[0]["title"] + "\n" + listener.posts[0]["message"]
    assert API_KEY not in text and API_KEY not in done.stderr
    assert "esper-warehouse: partial" in text
    assert "GET /pipelines/v0/runs/ answered 403" in text  # the refused route
    with duckdb.connect(str(wh), read_only=True) as con:
        counts = con.execute(
            "select change_label, count(*) from marts.fleet_changes where as_of = "
            "(select max(as_of) from marts.fleet_changes) and change <> 'not_compared' group by 1"
        ).fetchall()
    for label, count in counts:
        assert f"{label}: {count}" in text
    assert "not compared: Pipelines held back: GET /pipelines/v0/runs/ refused (403)" in text


def test_a_refusing_or_hanging_target_costs_seconds_and_changes_nothing(
    sim, wh, modelled_first_load, hanging
):
    refusing = Listener(status=500)
    try:
        modelled_first_load(wh)
        sim.advance(24)
        urls = [f"json://127.0.0.1:{refusing.port}/", f"json://127.0.0.1:{hanging}/"]
        done = _nightly(sim, wh, *[a for url in urls for a in ("--notify", url)])
        assert done.returncode == 0, done.stderr  # the run's own code
        assert "notification" in done.stderr and API_KEY not in done.stderr
        assert len(refusing.posts) == 1
        with duckdb.connect(str(wh), read_only=True) as con:
            (status,) = con.execute(
                "select status from esper._esper_runs order by started_at desc limit 1"
            ).fetchone()  # type: ignore[misc]
            assert status == "ok"
            assert con.execute("select count(*) from changes.comparisons").fetchone() == (1,)

        # the cost, measured on the sender itself: a hanging target is given up in time
        result = type("Result", (), {"status": "ok", "as_of": None, "unavailable": {}})()
        started = time.monotonic()
        assert notify.send(urls, result, wh) is False
        assert time.monotonic() - started < notify.DEADLINE_S + 1.5
    finally:
        refusing.close()
