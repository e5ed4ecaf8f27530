"""Progress while extracting: one line rewritten in place on a terminal, log lines otherwise (cron)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict
from typing import Any

log = logging.getLogger("esper_warehouse")


class Progress:
    """Counts the rows each resource yields and reports them as they grow."""

    def __init__(self, tty: bool, every_s: float = 10.0) -> None:
        self.tty = tty
        self.every_s = every_s
        self.rows: dict[str, int] = defaultdict(int)
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._shown = False

    def attach(self, source: Any) -> None:
        """Count the rows of every selected resource (an Arrow table counts its rows)."""
        for name, resource in source.selected_resources.items():
            resource.add_map(self._counter(name))

    def _counter(self, name: str) -> Any:
        def count(item: Any) -> Any:
            rows = getattr(item, "num_rows", None)
            self.update(name, rows if rows is not None else 1)
            return item

        return count

    def update(self, name: str, rows: int) -> None:
        with self._lock:
            self.rows[name] += rows
            now = time.monotonic()
            if self.tty:
                _terminal().write("\r\x1b[K extracting: " + self.text()[-150:])
                _terminal().flush()
                self._shown = True
            elif now - self._last >= self.every_s:
                log.info("extract: progress %s", self.text())
                self._last = now

    def text(self) -> str:
        return ", ".join(f"{n} {r:,}" for n, r in self.rows.items()) or "no rows yet"

    def done(self) -> None:
        if self._shown:
            _terminal().write("\r\x1b[K")
            _terminal().flush()
            self._shown = False


def _terminal() -> Any:
    """The terminal itself, under the command line's `readable.Visible` (which would show the
    line's own escapes instead of obeying them): the progress line holds only table names and
    counts, never a text from the API."""
    return getattr(sys.stderr, "raw", sys.stderr)
