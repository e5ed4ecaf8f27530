"""`esper-warehouse report`: every notebook exported to HTML, and the README's charts as PNG.

    esper-warehouse report [--warehouse esper_warehouse.duckdb] [--out report/] [--charts docs/img/]

Each notebook under ``notebooks/`` runs headless through ``marimo export html`` against the
warehouse (passed as ``$ESPER_WAREHOUSE``); a cell that fails makes the command fail. marimo's
page (``<name>.interactive.html``) loads marimo's code from a CDN, so each is also written as a
self-contained page, ``<name>.html`` (``offline.py``: inline SVG charts, HTML tables, no network),
the one ``index.html`` links first: it opens on a locked-down machine and as a ticket attachment. ``--charts``
also runs the notebooks in-process and writes the charts listed in ``CHARTS`` as PNG files (through
vl-convert), so the README's pictures are the notebooks' own charts, produced by a command.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from esper_warehouse import data_path

from ..exit_codes import Exit
from . import digest, offline
from .status import no_run_message, open_failure

NOTEBOOKS_DIR = data_path("notebooks")
WAREHOUSE_ENV = "ESPER_WAREHOUSE"
RENDER_FAILURE = "Failed to get mimebundle"
NO_MODULE = re.compile(r"No module named '([\w.]+)'")  # a cell's import failed: say which
# The notebooks' banner when the warehouse stayed locked past their wait (notebooks/_common.py).
BUSY_PAGE = "The warehouse is busy"
# ... and when DuckDB could not read it: such a page shows no fleet, so it is no page rendered.
UNREADABLE_PAGE = "The warehouse cannot be read"

# (notebook, variable holding an altair chart, file name): the pictures the README shows.
CHARTS: tuple[tuple[str, str, str], ...] = (
    ("fleet_overview", "fleet_size_chart", "fleet-size.png"),
    ("fleet_overview", "verdict_chart", "compliance-verdicts.png"),
    ("fleet_overview", "trend_chart", "compliance-trend.png"),
    ("fleet_overview", "reasons_chart", "non-compliance-reasons.png"),
    ("fleet_overview", "last_seen_chart", "last-seen.png"),
    ("rollouts", "apps_now_chart", "apps-on-latest-version.png"),
    ("rollouts", "adoption_chart", "app-adoption.png"),
    ("rollouts", "command_outcomes_chart", "command-outcomes.png"),
    ("rollouts", "command_duration_chart", "command-time-to-completion.png"),
    ("rollouts", "operation_outcomes_chart", "operation-outcomes.png"),
)


@dataclass(frozen=True)
class Export:
    """The outcome of exporting one notebook."""

    notebook: Path
    html: Path
    ok: bool
    seconds: float
    errors: str  # marimo's stderr: the failing cells' errors when not ok
    busy: bool = False  # the page says the warehouse was held by another process
    interactive: Path | None = None  # marimo's own page (needs its CDN)


def notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The notebooks to export: every ``*.py`` in the folder except helpers (``_*.py``)."""
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def _marimo() -> list[str]:
    return [sys.executable, "-m", "marimo"]


def export_notebook(
    notebook: Path, out_dir: Path, warehouse: Path, include_code: bool = False
) -> Export:
    """Export one notebook with ``marimo export html``; ``ok`` is False when any cell failed.

    marimo 0.25 still writes the page when a cell raises, then exits 1 with "Export was
    successful, but some cells failed to execute." and the cell errors on stderr.
    """
    target = out_dir / f"{notebook.stem}.interactive.html"
    command = [
        *_marimo(),
        "export",
        "html",
        "--no-sandbox",
        "--force",
        "--include-code" if include_code else "--no-include-code",
        str(notebook),
        "-o",
        str(target),
    ]
    # The report's pages hold every row of a table (offline.REPORT_DIR_ENV): see offline.py.
    env = {
        **os.environ,
        WAREHOUSE_ENV: str(warehouse),
        offline.REPORT_DIR_ENV: str(out_dir.resolve()),
    }
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    log = done.stderr or done.stdout
    # A chart that cannot be serialised is only logged by marimo, but the page shows no chart.
    ok = done.returncode == 0 and target.exists() and RENDER_FAILURE not in log
    written = target.read_text(encoding="utf-8", errors="replace") if target.exists() else ""
    busy = BUSY_PAGE in written
    if UNREADABLE_PAGE in written:
        ok, log = False, f"{log}\n{notebook.name}: the page says {UNREADABLE_PAGE!r}"
    page = out_dir / f"{notebook.stem}.html"
    if target.exists():
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        footer = (
            f"esper-warehouse report, {html.escape(str(warehouse))}, exported {stamp}. "
            f'Interactive version (needs internet): <a href="{target.name}">{target.name}</a>.'
        )
        try:
            offline.write_offline(target, page, notebook.stem.replace("_", " "), footer)
        except Exception as error:  # a page marimo wrote without its session: say so
            ok, log = False, f"{log}\nno offline page for {notebook.name}: {error!r}"
    return Export(notebook, page, ok and not busy, seconds, log, busy, target)


def _changes(warehouse: Path) -> str:
    """What changed since the night before (`digest.py`, as `status` says it), for the top of the
    index: the first page the report opens on."""
    if not warehouse.exists():
        return ""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            if not digest.has_mart(con):
                return (
                    "<p>What changed overnight is not recorded in this warehouse: build the "
                    "models (<code>esper-warehouse models</code>).</p>"
                )
            return digest.as_html(digest.read(con), digest.not_compared_label(con))
    except duckdb.Error as error:
        return f"<p>What changed overnight could not be read: {html.escape(str(error))}</p>"


def _index(exports: Sequence[Export], warehouse: Path) -> str:
    rows = "\n".join(
        f'<li><a href="{e.html.name}">{html.escape(e.notebook.stem.replace("_", " "))}</a>'
        + (
            f' (<a href="{e.interactive.name}">interactive</a>, needs internet)'
            if e.interactive is not None
            else ""
        )
        + (
            ""
            if e.ok
            else " <strong>(the warehouse was busy)</strong>"
            if e.busy
            else " <strong>(a cell failed)</strong>"
        )
        + "</li>"
        for e in exports
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>esper-warehouse report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;line-height:1.6}}
code{{background:#f3f3f3;padding:0 .3em}}
section.digest{{border-left:4px solid #54aeff;padding:0 1em}}</style></head>
<body><h1>esper-warehouse report</h1>
<p>Warehouse <code>{html.escape(str(warehouse))}</code>, exported {stamp}.</p>
{_changes(warehouse)}
<h2>Pages</h2>
<ul>
{rows}
</ul>
<p>Each page opens without network access (charts and tables are in the file). The
interactive pages load marimo from its CDN. To explore, run
<code>marimo edit notebooks/&lt;name&gt;.py</code>.</p>
</body></html>
"""


def export_all(
    warehouse: Path, out_dir: Path, include_code: bool = False, jobs: int | None = None
) -> list[Export]:
    """Export every notebook (in parallel, one process each) and write ``index.html``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    found = notebooks()
    workers = max(1, min(len(found), jobs or os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        exports = list(
            pool.map(lambda nb: export_notebook(nb, out_dir, warehouse, include_code), found)
        )
    (out_dir / "index.html").write_text(_index(exports, warehouse), encoding="utf-8")
    return exports


@contextlib.contextmanager
def _warehouse_env(warehouse: Path) -> Iterator[None]:
    before = os.environ.get(WAREHOUSE_ENV)
    os.environ[WAREHOUSE_ENV] = str(warehouse)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(WAREHOUSE_ENV, None)
        else:
            os.environ[WAREHOUSE_ENV] = before


def _run_notebook(name: str) -> dict[str, object]:
    """Run a notebook in this process (marimo's script mode) and return its definitions."""
    path = NOTEBOOKS_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"esper_notebook_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if str(NOTEBOOKS_DIR) not in sys.path:
        sys.path.insert(0, str(NOTEBOOKS_DIR))
    _, defs = module.app.run()
    return dict(defs)


def write_charts(warehouse: Path, charts_dir: Path, scale: float = 2.0) -> list[Path]:
    """Write the ``CHARTS`` as PNG files; raise when a notebook no longer defines one."""
    import vl_convert  # the `notebooks` extra: only `report --charts` needs it

    charts_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with _warehouse_env(warehouse):
        for name in dict.fromkeys(nb for nb, _, _ in CHARTS):
            defs = _run_notebook(name)
            for _, variable, filename in (c for c in CHARTS if c[0] == name):
                chart = defs.get(variable)
                if chart is None or not hasattr(chart, "to_json"):
                    raise LookupError(f"notebooks/{name}.py defines no chart `{variable}`")
                target = charts_dir / filename
                target.write_bytes(
                    vl_convert.vegalite_to_png(offline.drawable(chart.to_json()), scale=scale)
                )
                written.append(target)
    return written


def unreadable(warehouse: Path, dataset: str = "esper") -> tuple[int, str] | None:
    """Why the file cannot be opened read-only (`open_failure`: held by another process,
    damaged or not a DuckDB file, ...) or holds no run yet (`no_run_message`, exit 2), with
    its exit code; None when it opens and a run has loaded it."""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            empty = no_run_message(con, warehouse, dataset)
    except duckdb.Error as error:
        return open_failure(warehouse, error)
    return (Exit.CONFIG, empty) if empty is not None else None
