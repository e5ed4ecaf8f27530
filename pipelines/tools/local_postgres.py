"""A local PostgreSQL to try `run --destination postgres` and `publish` (docs/guide/growing.md, "Postgres").

`python -m esper_warehouse.pipelines.tools.local_postgres [DIR]` starts pgserver (the `postgres`
extra; `make install` installs it) on a unix socket in DIR (default `.pgdata`), leaves it
running, and prints the `export DESTINATION__POSTGRES__CREDENTIALS=...` line to `eval`. pgserver
hands out `postgresql://postgres:@/postgres?host=<socket folder>`, which dlt refuses ("missing
field(s): host"); libpq lets the socket folder in `?host=` win over a host in the authority, so
the printed URI names `localhost` there and both dlt and `publish` accept it. `--stop` stops the
server of DIR.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import warnings
from pathlib import Path

from ..exit_codes import Exit

CREDENTIALS_ENV = "DESTINATION__POSTGRES__CREDENTIALS"
DEFAULT_DIR = Path(".pgdata")


def dlt_uri(uri: str) -> str:
    """pgserver's socket URI with the host dlt requires (the socket folder still wins)."""
    return uri.replace("postgres:@/", "postgres:@localhost/", 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m esper_warehouse.pipelines.tools.local_postgres",
        description="Start (or stop) a local PostgreSQL with pgserver and print the credentials "
        f"line to eval ({CREDENTIALS_ENV}).",
    )
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR, help="data folder")
    parser.add_argument("--stop", action="store_true", help="stop the server of DIR")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR note would reach the eval
    logging.getLogger("pgserver").setLevel(logging.ERROR)
    try:
        import pgserver
    except ImportError:
        print(
            "error: pgserver is not installed: `make install` (the postgres extra)", file=sys.stderr
        )
        return Exit.CONFIG
    folder = args.dir.expanduser().resolve()
    if args.stop:
        if not folder.is_dir():
            print(f"error: no server data in {folder}", file=sys.stderr)
            return Exit.CONFIG
        pgserver.get_server(folder, cleanup_mode="stop").cleanup()
        print(f"# stopped the PostgreSQL of {folder}")
        return Exit.OK
    server = pgserver.get_server(folder, cleanup_mode=None)  # keeps running after this process
    print(f"export {CREDENTIALS_ENV}={shlex.quote(dlt_uri(server.get_uri()))}")
    return Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
