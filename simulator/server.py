"""Serve an ASGI app with uvicorn in a background thread on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class BackgroundServer:
    """uvicorn on 127.0.0.1 in a daemon thread; ``start()`` returns once it accepts requests."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def start(self, timeout: float = 10.0) -> int:
        """Bind, start serving, wait until ready; returns the port."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=30,
            backlog=2048,
            date_header=False,  # the app sends the simulated Date
            server_header=False,
            timeout_graceful_shutdown=2,  # a client's idle keep-alive never holds up a stop
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="esper-sim", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulator server did not start")
            time.sleep(0.01)
        return self.port

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None
