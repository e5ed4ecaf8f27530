"""The headline numbers as the command line shows them, read from their one home, `marts.headlines`.

`sql/marts/headlines.sql` defines every number (the compliance rate and its denominator, devices
not seen, low battery, the worst command rollouts, the top reasons, credentials, drift, who may
wipe); the demo's summary and `esper-warehouse status` print these rows and count nothing
themselves. tests/notebooks/test_every_surface.py holds every surface to the mart.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class Headline:
    """One row of marts.headlines: a headline's own number (item None) or one of its items."""

    headline: str
    item: str | None
    rank: int | None
    label: str
    value: int | None  # None: unknown (a table family it reads was never loaded)
    denominator: int | None
    share: float | None
    # how old the number is, in the mart's words (None: loaded by the latest run): "Pipelines: as
    # of 2026-10-03 00:00 UTC (3 days old: ...)" or "Pipelines: unknown (never loaded: ...)"
    age_note: str | None = None
    is_known: bool = True

    def aged(self, text: str) -> str:
        """`text` (a line showing this number) followed by the number's age, when it has one."""
        return f"{text} [{self.age_note}]" if self.age_note else text


@dataclass(frozen=True)
class Headlines:
    """Every row of marts.headlines, by headline."""

    rows: tuple[Headline, ...]

    def number(self, headline: str) -> Headline | None:
        """The headline's own number (None when the mart has no such row)."""
        return next((r for r in self.rows if r.headline == headline and r.item is None), None)

    def items(self, headline: str) -> list[Headline]:
        """The headline's items (a list or a breakdown), first first."""
        found = [r for r in self.rows if r.headline == headline and r.item is not None]
        return sorted(found, key=lambda r: (r.rank is None, r.rank))


def marts(con: duckdb.DuckDBPyConnection) -> str:
    """The marts schema, named with its catalog (a file named like a schema makes `marts.x`
    ambiguous)."""
    catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
    return f'"{catalog}".marts'


def ranked_from_devices(con: duckdb.DuckDBPyConnection) -> int:
    """The fewest target devices of a rollout ranked among the worst: the models' macro
    `rollout_ranked_from_devices()` (sql/macros/macros.sql, its one home; stored in the warehouse
    by the build)."""
    return int(con.execute("select rollout_ranked_from_devices()").fetchone()[0])  # type: ignore[index]


def read(con: duckdb.DuckDBPyConnection) -> Headlines | None:
    """marts.headlines, or None when the marts are not built (`esper-warehouse models`).

    Marts an earlier release built have no age columns: their numbers read as current."""
    columns = "headline, item, item_rank, label, value, denominator, share"
    for ages in (", age_note, is_known", ""):
        try:
            rows = con.execute(
                f"select {columns}{ages} "
                f"from {marts(con)}.headlines order by headline, item_rank nulls first"
            ).fetchall()
        except duckdb.Error:
            continue
        return Headlines(tuple(Headline(*row) for row in rows))
    return None


def share(row: Headline | None) -> str:
    """A headline's share as a percentage with one decimal ("45.3%"), "n/a" without one,
    "unknown" when its number is unknown."""
    if row is not None and not row.is_known:
        return "unknown"
    return f"{row.share:.1%}" if row is not None and row.share is not None else "n/a"


def of(row: Headline | None) -> str:
    """`value of denominator` ("1 of 4"), the value alone without a denominator; "unknown" when
    a table family the number reads was never loaded (never 0)."""
    if row is None:
        return "n/a"
    if not row.is_known or row.value is None:
        return "unknown"
    return f"{row.value:,}" + (f" of {row.denominator:,}" if row.denominator is not None else "")
