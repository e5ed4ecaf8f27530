"""What changed overnight, as every surface tells it: `changes`, `status`'s "Since" block, the
report's first page, the notebook and the notification read `marts.fleet_changes` through `read`,
and print the words of `sql/vocabulary/change_kinds.csv` (the mart's `change_label`).

A digest covers one or more as-ofs (the last night by default): per change, its count and its
first subjects ("N of M" when cut), and the families not compared, with why.
"""

from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import duckdb

from .. import readable

SHOWN = 3  # subjects named per change on the short surfaces (status, notification)


@dataclass(frozen=True)
class Change:
    """One kind of change in the digest: its words, how many, and the first subjects."""

    change: str
    label: str
    count: int
    subjects: list[str]  # the first names (the subject's name, else its id), in name order


@dataclass(frozen=True)
class Digest:
    since: datetime | None  # the earliest earlier as-of of the rows (None: no night compared)
    as_of: datetime | None  # the latest as-of covered (None: the mart holds nothing yet)
    nights: int  # the as-ofs covered
    changes: list[Change] = field(default_factory=list)
    not_compared: list[tuple[str, str]] = field(default_factory=list)  # (family label, why)
    # how much older the digest is than the warehouse's latest night, and why (a night that
    # did not load compares nothing): None when it is the latest night's
    age_note: str | None = None

    @property
    def total(self) -> int:
        return sum(change.count for change in self.changes)


def has_mart(con: duckdb.DuckDBPyConnection) -> bool:
    """The warehouse was modelled by a release that records changes."""
    row = con.execute(
        "select count(*) from information_schema.tables where table_catalog = current_database() "
        "and (table_schema, table_name) in (('marts', 'fleet_changes'), ('changes', 'comparisons'))"
    ).fetchone()
    return bool(row and row[0] == 2)


def read(
    con: duckdb.DuckDBPyConnection,
    *,
    since: date | None = None,
    nights: int | None = None,
    first: int = SHOWN,
) -> Digest:
    """The digest of the as-ofs after `since` (a UTC day), or of the last `nights` as-ofs, or
    (neither) of the last one."""
    window, params = _window(con, since, nights)
    covered = con.execute(
        f"select min(since), max(as_of), count(*) from changes.comparisons where {window}", params
    ).fetchone()
    assert covered is not None
    rows = con.execute(
        f"select change, any_value(change_label), count(*), "
        f"list(coalesce(subject_name, subject_id) order by coalesce(subject_name, subject_id), "
        f"subject_id)[1:{int(first)}] "
        f"from marts.fleet_changes where {window} and change <> 'not_compared' "
        f"group by change order by min(change_position), change",
        params,
    ).fetchall()
    held = con.execute(
        f"select subject_name, arg_max(reason, as_of) from marts.fleet_changes "
        f"where {window} and change = 'not_compared' group by subject_name order by 1",
        params,
    ).fetchall()
    return Digest(
        since=covered[0],
        as_of=covered[1],
        nights=int(covered[2] or 0),
        changes=[Change(r[0], r[1] or r[0], int(r[2]), list(r[3])) for r in rows],
        not_compared=[(str(r[0]), str(r[1])) for r in held],
        age_note=_age_note(con, covered[1]),
    )


def _age_note(con: duckdb.DuckDBPyConnection, as_of: datetime | None) -> str | None:
    """'1 days old: the run of 2026-10-04 00:00 UTC failed' when nights after `as_of` compared
    nothing (int_as_of: the time every age counts to, and the night that did not load)."""
    if as_of is None:
        return None
    row = con.execute(
        "select case when aged_at > ? then age_label(?, aged_at) || ': ' "
        "|| coalesce(night_note, 'no night compared since') end from intermediate.int_as_of",
        [as_of, as_of],
    ).fetchone()
    return str(row[0]) if row and row[0] else None


def not_compared_label(con: duckdb.DuckDBPyConnection) -> str:
    """The vocabulary's words for a family not compared."""
    row = con.execute(
        "select label from seeds.change_kinds where change = 'not_compared'"
    ).fetchone()
    return str(row[0]) if row else "not compared"


def terminal(text: str) -> str:
    """API text made safe for a terminal: control characters (an escape sequence, a carriage
    return that rewrites the line) are shown as their code instead of acting."""
    return "".join(
        ch if not unicodedata.category(ch).startswith("C") else f"\\x{ord(ch):02x}" for ch in text
    )


def _when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC" if value is not None else "–"


def lines(
    digest: Digest, not_compared: str, *, shown: int = SHOWN, escape: Any = terminal
) -> list[str]:
    """The digest as text lines: a heading, a line per change (count and first subjects, "N of
    M" when cut), a line per family not compared. `escape` makes API text safe for the target."""
    if digest.as_of is None:
        return ["no changes recorded yet: the first night after the first load compares"]
    nights = f", {digest.nights} nights" if digest.nights > 1 else ""
    age = f"; {escape(digest.age_note)}" if digest.age_note else ""
    out = [
        f"Since {_when(digest.since)} (as of {_when(digest.as_of)}{nights}{age}): "
        f"{digest.total:,} changes"
    ]
    for change in digest.changes:
        if not shown:  # the caller lists every subject below
            out.append(f"  {change.label}: {change.count:,}")
            continue
        names = ", ".join(escape(name) for name in change.subjects[:shown])
        cut = readable.shown_of(min(shown, len(change.subjects)), change.count)
        out.append(f"  {change.label}: {change.count:,} ({names}" + (f"; {cut})" if cut else ")"))
    for label, why in digest.not_compared:
        out.append(f"  {not_compared}: {escape(label)} {escape(why)}")
    return out


def as_html(digest: Digest, not_compared: str, *, shown: int = SHOWN) -> str:
    """The digest as an HTML block (the report's index page, the fleet notebook): the lines of
    `lines`, each escaped for HTML, under the heading "What changed since <as-of>"."""
    found = [html.escape(line.strip()) for line in lines(digest, not_compared, shown=shown)]
    title = (
        f"What changed since {_when(digest.since)}"
        if digest.as_of is not None
        else "What changed overnight"
    )
    items = "".join(f"<li>{line}</li>" for line in found[1:])
    return (
        f'<section class="digest"><h2>{html.escape(title)}</h2><p>{found[0]}</p>'
        + (f"<ul>{items}</ul>" if items else "")
        + "</section>"
    )


def as_json(digest: Digest, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The digest as JSON-ready data (`changes --json`, the notification's payload)."""
    out: dict[str, Any] = {
        "since": digest.since.isoformat() if digest.since else None,
        "as_of": digest.as_of.isoformat() if digest.as_of else None,
        "nights": digest.nights,
        "total": digest.total,
        "age_note": digest.age_note,
        "counts": {c.change: c.count for c in digest.changes},
        "labels": {c.change: c.label for c in digest.changes},
        "first_subjects": {c.change: c.subjects for c in digest.changes},
        "not_compared": [{"family": label, "reason": why} for label, why in digest.not_compared],
    }
    if rows is not None:
        out["changes"] = rows
    return out


def _window(
    con: duckdb.DuckDBPyConnection, since: date | None, nights: int | None
) -> tuple[str, list[Any]]:
    """The `where` of the as-ofs compared on or after `since` (a UTC day), else of the last
    `nights` (default 1) compared (changes.comparisons: nights without changes count too)."""
    if since is not None:
        return "as_of >= ?::date", [since]
    found = con.execute(
        "select list(as_of order by as_of desc)[1:?] from changes.comparisons", [nights or 1]
    ).fetchone()
    return "as_of in (select unnest(?))", [found[0] if found and found[0] else []]


def rows(
    con: duckdb.DuckDBPyConnection, *, since: date | None = None, nights: int | None = None
) -> list[dict[str, Any]]:
    """Every row of the digest's as-ofs (the `changes` command lists them all)."""
    window, params = _window(con, since, nights)
    cursor = con.execute(
        f"select as_of, since, change, change_label, subject_kind, subject_id, subject_name, "
        f"before, after, reason from marts.fleet_changes where {window} "
        f"order by as_of, change_position, subject_name, subject_id",
        params,
    )
    names = [d[0] for d in cursor.description]
    return [
        {
            k: (v.isoformat() if isinstance(v, datetime) else v)
            for k, v in zip(names, r, strict=True)
        }
        for r in cursor.fetchall()
    ]


def status_block(con: duckdb.DuckDBPyConnection) -> list[str]:
    """`status`'s "Since <as-of>" block: the last night's changes (none before a release that
    records them)."""
    if not has_mart(con):
        return []
    return lines(read(con), not_compared_label(con))
