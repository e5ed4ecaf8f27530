"""Open report pages in a real headless Chromium with the network off, and take screenshots.

Used by the report's browser test, and by hand to refresh the pictures in docs/img/:

    python -m tests.notebooks.browser REPORT_DIR docs/img

Chromium is Debian's (`apt-get install chromium`; `make test` installs it when it can), found at
`$CHROMIUM` or /usr/bin/chromium. Every request goes to a dead proxy, and the browser's network
log is kept: a page that needed the network shows its requests there, and renders without them.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Chromium's own background traffic (updates, clock, accounts), not the page's.
BROWSER_HOSTS = re.compile(r"^https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gstatic\.com)/")
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--proxy-server=socks5://127.0.0.1:9",  # nothing listens there: no network at all
]


def chromium() -> str:
    """The browser's path, or an AssertionError saying how to install it."""
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).exists():
        raise AssertionError(
            "Chromium is needed to check the report in a real browser: "
            "`sudo apt-get install chromium` (or set CHROMIUM to its path)"
        )
    return found


@dataclass(frozen=True)
class Opened:
    dom: str  # the page's DOM after it rendered
    requests: list[str]  # URLs the page asked for over the network (none for an offline page)


def open_offline(page: Path, width: int = 1280, fragment: str = "") -> Opened:
    """Render `page` from file:// with the network off (at `#fragment`, when given: what a click
    on a link to it does); its DOM and the network it wanted."""
    with tempfile.TemporaryDirectory() as folder:
        netlog = Path(folder) / "net.json"
        done = subprocess.run(
            [chromium(), *FLAGS, f"--window-size={width},2000", f"--user-data-dir={folder}/p",
             f"--log-net-log={netlog}", "--dump-dom",
             page.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        text = netlog.read_text(encoding="utf-8", errors="replace") if netlog.exists() else ""
    urls = sorted(set(json.loads(f'"{u}"') for u in re.findall(r'"url":"((?:[^"\\]|\\.)*)"', text)))
    wanted = [u for u in urls if u.startswith("http") and not BROWSER_HOSTS.match(u)]
    return Opened(done.stdout, wanted)


def measured(page: Path, script: str, folder: Path, width: int = 1280) -> Any:
    """What `script` measured on `page` as Chromium laid it out: the page is copied into `folder`
    without its Content-Security-Policy (which runs no script), `script` runs once the page has
    loaded and returns a value, and that value comes back as JSON through the DOM."""
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probe = (
        "<script>addEventListener('load', () => document.body.setAttribute("
        f"'data-measured', JSON.stringify((() => {{ {script} }})())));</script>"
    )
    copy = folder / f"measured-{page.name}"
    copy.write_text(text.replace("</body>", probe + "</body>"), encoding="utf-8")
    found = re.search(r'data-measured="([^"]*)"', open_offline(copy, width).dom)
    assert found, "the measuring script did not run"
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, target: Path, width: int = 1280, height: int = 4000) -> Path:
    """A screenshot of `page` (network off), `width` pixels wide."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [chromium(), *FLAGS, f"--window-size={width},{height}", f"--user-data-dir={folder}/p",
             f"--screenshot={target.resolve()}", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0 and target.exists(), done.stderr[-2000:]
    return target


def main(argv: list[str]) -> int:
    """`python -m tests.notebooks.browser REPORT_DIR OUT_DIR`: a PNG of every page of a report."""
    report, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for page in sorted(report.glob("*.html")):
        if page.name.endswith(".interactive.html"):
            continue
        name = "report-index" if page.stem == "index" else f"notebook-{page.stem.replace('_', '-')}"
        height = 900 if page.stem == "index" else 4000
        print(screenshot(page, out / f"{name}.png", height=height))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
