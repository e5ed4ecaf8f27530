"""How a span of time reads to a person, wherever one is shown (the demo's summary, the report's
tables): minutes while under an hour, hours while under two days, then days."""

from __future__ import annotations


def duration(minutes: float | None) -> str:
    """``45 min``, ``3.5 h``, ``2.0 days``; ``–`` when unknown."""
    if minutes is None:
        return "–"
    if minutes < 60:
        return f"{minutes:.0f} min"
    if minutes < 48 * 60:
        return f"{minutes / 60:.1f} h"
    return f"{minutes / (24 * 60):.1f} days"


def shown_of(shown: int, total: int) -> str:
    """How much of a list a surface shows, in the words every surface uses: ``""`` when it shows
    all `total` items, else ``"N of M"``. A list, a top-N chart or table, a top-N line of the
    demo says this in its title, so nothing is cut without saying so."""
    return "" if shown >= total else f"{shown:,} of {total:,}"
