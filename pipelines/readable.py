"""How a value reads to a person, wherever one is shown (the demo's summary, the report's tables
and charts, the terminal): a span of time, a cut list, a text from the API."""

from __future__ import annotations

import io
import re
from typing import TextIO

# Characters that act instead of showing: C0 controls but tab and newline (ESC starts a
# terminal's colour, title and hyperlink sequences; XML 1.0 refuses most of them, and an SVG
# with one stops the chart renderer), DEL, C1 controls (CSI, OSC on some terminals), and the
# bidirectional overrides and isolates that reorder what is shown around them.
_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def duration(minutes: float | None) -> str:
    """``45 min``, ``3.5 h``, ``24 h``, ``2.5 days``, ``7 days``; ``–`` when unknown. A whole
    number of hours or days reads without its ``.0``."""
    if minutes is None:
        return "–"
    if minutes < 60:
        return f"{minutes:.0f} min"
    if minutes < 48 * 60:
        return f"{_tenths(minutes / 60)} h"
    return f"{_tenths(minutes / (24 * 60))} days"


def _tenths(value: float) -> str:
    text = f"{value:.1f}"
    return text.removesuffix(".0")


def shown_of(shown: int, total: int) -> str:
    """How much of a list a surface shows, in the words every surface uses: ``""`` when it shows
    all `total` items, else ``"N of M"``. A list, a top-N chart or table, a top-N line of the
    demo says this in its title, so nothing is cut without saying so."""
    return "" if shown >= total else f"{shown:,} of {total:,}"


def visible(text: str) -> str:
    """`text` with every character that would act rather than show (`_ACTING`) written as its
    escape (``\\x1b``, ``\\u202e``): a value from the API reads as what it holds, on a terminal,
    in an SVG chart or a page."""
    return _ACTING.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class Visible(io.TextIOBase):
    """A terminal stream whose every write goes through `visible`: what a command prints (its
    report, its log lines, the API's texts they quote) cannot move the cursor, recolour, retitle
    the terminal or hide a hyperlink. `raw` is the stream itself, for the progress line's own
    escapes."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding
