"""A real PostgreSQL server for the tests: pgserver (the `postgres` extra), else Debian's binaries.

The test is skipped only when neither can start a server; `make install` installs the extras,
so CI has pgserver.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def _pgserver(data: Path) -> Iterator[str]:
    import pgserver

    # its exit handler logs after pytest closed the streams: keep it to warnings
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        # dlt's credentials need a host: libpq lets the socket folder in `?host=` win over it
        yield server.get_uri().replace("postgres:@/", "postgres:@localhost/")
    finally:
        server.cleanup()


@contextmanager
def _debian(data: Path) -> Iterator[str]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise FileNotFoundError("no /usr/lib/postgresql/*/bin/initdb")
    bindir = Path(bins[-1]).parent
    socket = Path(tempfile.mkdtemp(prefix="pgsock-"))
    user = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    if user:
        shutil.chown(data, "postgres")
        shutil.chown(socket, "postgres")
    subprocess.run([*user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust"], check=True, capture_output=True)  # fmt: skip
    opts = f"-k {socket} -c listen_addresses=''"
    ctl = [*user, str(bindir / "pg_ctl"), "-D", str(data)]
    subprocess.run([*ctl, "-o", opts, "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres:@localhost/postgres?host={socket}"
    finally:
        subprocess.run([*ctl, "-m", "fast", "stop"], capture_output=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """The URI of a fresh PostgreSQL server on a local socket, stopped at the end."""
    errors = []
    for start in (_pgserver, _debian):
        data = Path(tempfile.mkdtemp(prefix="esper-pg-"))
        try:
            with start(data) as uri:
                yield uri
                return
        except (ImportError, OSError, subprocess.CalledProcessError, RuntimeError) as error:
            errors.append(f"{start.__name__}: {error}")
        finally:
            shutil.rmtree(data, ignore_errors=True)
    pytest.skip("no PostgreSQL server could start: " + "; ".join(errors))
