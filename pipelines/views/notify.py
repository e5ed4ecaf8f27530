"""One message after every run, where the admin looks (`run --notify URL`; the setting
`notify_urls`), sent by Apprise: Slack, Teams, mail, ntfy, Discord, and `json://` for any webhook.

The message: the night's outcome (loaded; partial: what was refused; failed: why), what changed
(`digest.py`: the counts and the first subjects, the families not compared) and the freshness
warnings (`status.freshness`). The key never reaches it (every text goes through the source's
redaction); API text is stripped of control characters and sent as plain text, which Apprise
escapes for each target's markup (HTML for mail, Slack's `<>&`, JSON for webhooks).

A notification never changes the run: a target that refuses is logged, one that hangs is given
up after `DEADLINE_S` (the sending thread is left to Apprise's own socket timeouts), and the run's
exit code and what it committed stay as they were.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from . import digest

log = logging.getLogger("esper_warehouse.notify")

NOTIFY_ENV = "ESPER_WAREHOUSE__NOTIFY_URLS"
DEADLINE_S = 6.0  # the most a notification may add to a run
SOCKET_TIMEOUT_S = 3.0  # Apprise's connect and read timeouts per target


def notify_urls_default() -> list[str]:
    """`esper_warehouse.notify_urls` from dlt's configuration (`.dlt/config.toml`, or
    `$ESPER_WAREHOUSE__NOTIFY_URLS`): a TOML list, a JSON list, or URLs separated by spaces or
    commas; [] when unset."""
    import dlt

    value = dlt.config.get("esper_warehouse.notify_urls")
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            value = json.loads(text)
        else:
            return [u for u in text.replace(",", " ").split() if u]
    return [str(u).strip() for u in value if str(u).strip()]


@dataclass(frozen=True)
class Recorded:
    """A night as the run ledger (`_esper_runs`) recorded it: what `outcome` reads of a run, for
    a sender that did not run it (Dagster's models step, after its tenant's load step)."""

    status: str
    as_of: datetime | None
    error: str | None
    unavailable: dict[str, str]


def last_run(warehouse: Path, dataset: str = "esper") -> Recorded | None:
    """The latest run the warehouse's ledger holds (None: no run recorded)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        try:
            row = con.execute(
                f'select status, as_of, error, unavailable from "{dataset}"._esper_runs '
                "order by started_at desc limit 1"
            ).fetchone()
        except duckdb.CatalogException:
            return None
    if row is None:
        return None
    return Recorded(str(row[0]), row[1], row[2], json.loads(row[3]) if row[3] else {})


def _redact(text: str) -> str:
    from esper_warehouse.sources.esper.http.errors import redact

    return redact(text)


def outcome(result: Any) -> str:
    """The night's outcome in a line: loaded, partial (what was refused), failed (why)."""
    as_of = f" as of {result.as_of:%Y-%m-%d %H:%M} UTC" if result.as_of else ""
    if result.status == "ok":
        return f"loaded{as_of}"
    if result.status == "partial":
        refused = "; ".join(
            f"{table}: {why}" for table, why in sorted((result.unavailable or {}).items())
        )
        return f"partial{as_of}: refused {refused}"
    return f"{result.status}: {result.error or 'no reason recorded'}"


def message(result: Any, warehouse: Path) -> tuple[str, str]:
    """The title and body of the night's message (plain text, redacted)."""
    lines = [outcome(result)]
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error as error:
        lines.append(f"changes and freshness not read: {error}")
    else:
        try:
            if digest.has_mart(con):
                lines += digest.lines(digest.read(con), digest.not_compared_label(con))
            from .status import freshness

            lines += [
                f"warning: {f.label} held back: {f.note}" for f in freshness(con) if f.is_held_back
            ]
        except duckdb.Error as error:
            lines.append(f"changes and freshness not read: {error}")
        finally:
            con.close()
    title = f"esper-warehouse: {result.status}"
    return _redact(title), _redact("\n".join(lines))


def send(urls: Sequence[str], result: Any, warehouse: Path) -> bool:
    """Send the night's message to every URL; True when every target took it. Never raises."""
    if not urls:
        return True
    try:
        title, body = message(result, warehouse)
    except Exception as error:  # the run is over and committed: a message never undoes it
        log.warning("notification not sent: %s", _redact(f"{type(error).__name__}: {error}"))
        return False
    sent: list[bool] = []

    def deliver() -> None:
        try:
            import apprise

            apobj = apprise.Apprise()
            for url in urls:
                joiner = "&" if "?" in url else "?"
                timeouts = f"cto={SOCKET_TIMEOUT_S:g}&rto={SOCKET_TIMEOUT_S:g}"
                if not apobj.add(f"{url}{joiner}{timeouts}"):
                    log.warning("notification URL not understood by Apprise: %s", _redact(url))
            sent.append(
                bool(len(apobj))
                and bool(
                    apobj.notify(body=body, title=title, body_format=apprise.NotifyFormat.TEXT)
                )
            )
        except Exception as error:
            log.warning("notification failed: %s", _redact(f"{type(error).__name__}: {error}"))
            sent.append(False)

    worker = threading.Thread(target=deliver, name="notify", daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    if worker.is_alive():
        log.warning("notification gave up after %g s: a target did not answer", DEADLINE_S)
        return False
    if not sent or not sent[0]:
        log.warning("notification not delivered to every target (see the lines above)")
        return False
    return True
