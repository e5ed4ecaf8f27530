"""The morning check of `esper-warehouse status`: did last night load, and when did one last?

`night_alarm` gives the lines `status` prints on stderr with exit 8 (README "Every morning"):
the latest run loaded nothing (its status, sql/vocabulary/run_statuses.csv, is not loaded), or no
run has loaded for longer than `freshness_warn_after_hours()` of wall-clock time.
"""

from __future__ import annotations

import csv
import fcntl
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from .. import readable
from ..bookkeeping import STARTED
from ..build.model_files import SQL_DIR
from ..warehouse import run_lock_path


@dataclass(frozen=True)
class Run:
    """One row of `_esper_runs`, as the morning check reads it."""

    started_at: datetime
    as_of: datetime | None
    status: str
    error: str | None

    def api_time(self) -> str:
        """The API time it saw, or why there is none, in words (never `None`)."""
        if self.as_of is not None:
            return f"API time {self.as_of:%Y-%m-%d %H:%M} UTC"
        if self.status == STARTED:
            return "no API time recorded"
        return "no API time: no answer was read"

    def named(self) -> str:
        return f"the run started {self.started_at:%Y-%m-%d %H:%M} UTC ({self.api_time()})"


def night_alarm(con: duckdb.DuckDBPyConnection, warehouse: Path, dataset: str) -> list[str]:
    """What the morning check says on stderr (exit 8), or nothing when the night is good.

    The latest run that is not running now loaded nothing: it, its reason in one or two lines,
    and the last good load. Or no run has loaded for longer than the warning age of wall-clock
    time (the runs' own clock: `started_at`, `finished_at`), e.g. a scheduler that stopped.
    """
    ds = f'"{dataset}"'
    if not con.execute(
        "select count(*) from information_schema.tables where table_schema = ? "
        "and table_name = '_esper_runs'",
        [dataset],
    ).fetchone()[0]:  # type: ignore[index]
        return []
    recent = [
        Run(*row)
        for row in con.execute(
            f"select started_at, as_of, status, error from {ds}._esper_runs "
            "order by started_at desc limit 2"
        ).fetchall()
    ]
    if recent and recent[0].status == STARTED and run_in_progress(warehouse):
        recent = recent[1:]  # it is running now: the night before is the one to judge
    statuses = run_statuses()
    loaded = [status for status, (is_loaded, _words) in statuses.items() if is_loaded]
    marks = ", ".join("?" for _ in loaded)
    good = con.execute(
        f"select started_at, as_of, status, error, finished_at from {ds}._esper_runs "
        f"where status in ({marks}) order by started_at desc limit 1",
        list(loaded),
    ).fetchone()
    last_good = (
        f"last good load: {Run(*good[:4]).named()}, {_ago(good[4] or good[0])}"
        if good
        else "last good load: none, no run has loaded this warehouse yet"
    )
    if recent and recent[0].status not in loaded:
        latest = recent[0]
        words = statuses.get(latest.status, (False, latest.status))[1]
        lines = [f"error: the last night did not load: {latest.named()} {words}"]
        if reason := shown_reason(latest.error):
            lines.append(f"  cause: {reason}")
        return [*lines, f"  {last_good}"]
    warn = warn_after_hours(con)
    if good is not None and _hours_since(good[4] or good[0]) > warn:
        return [
            f"error: no run has loaded for more than {warn:g} h of wall-clock time "
            "(freshness_warn_after_hours()): is the nightly still scheduled?",
            f"  {last_good}",
        ]
    return []


def run_statuses() -> dict[str, tuple[bool, str]]:
    """status -> (is_loaded, words) of sql/vocabulary/run_statuses.csv, read here without the
    source package (sources/esper/vocabulary.py imports dlt, ~1 s for `status`)."""
    with (SQL_DIR / "vocabulary" / "run_statuses.csv").open(newline="") as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        return {row["status"]: (row["is_loaded"] == "true", row["words"]) for row in rows}


def shown_reason(error: str | None, limit: int = 300) -> str | None:
    """A run's recorded error (redacted as it was recorded) as two lines at most for a terminal:
    characters that would act shown as their escapes (`readable.visible`), cut at `limit`."""
    if not error:
        return None
    lines = [line.strip() for line in error.splitlines() if line.strip()][:2]
    text = " / ".join(lines)
    text = readable.visible(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_in_progress(warehouse: Path) -> bool:
    """Whether a run holds the warehouse's run lock now (`warehouse.run_lock`)."""
    path = run_lock_path(warehouse)
    if not path.exists():
        return False
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def warn_after_hours(con: duckdb.DuckDBPyConnection) -> float:
    """`freshness_warn_after_hours()`: the warehouse's macro once the models are built, else the
    one of sql/macros/macros.sql (its one home), read by DuckDB itself."""
    try:
        return float(con.execute("select freshness_warn_after_hours()").fetchone()[0])  # type: ignore[index]
    except duckdb.Error:
        pass
    text = (SQL_DIR / "macros" / "macros.sql").read_text()
    (statement,) = re.findall(r"create or replace macro freshness_warn_after_hours\(\)[^;]*;", text)
    with duckdb.connect() as scratch:
        scratch.execute(statement)
        return float(scratch.execute("select freshness_warn_after_hours()").fetchone()[0])  # type: ignore[index]


def _hours_since(at: datetime) -> float:
    return (datetime.now(UTC) - at).total_seconds() / 3600


def _ago(at: datetime) -> str:
    """`5 h ago`, `3 days ago` (wall clock), as the age notes count (whole hours under two days)."""
    hours = _hours_since(at)
    return f"{int(hours)} h ago" if hours < 48 else f"{int(hours // 24)} days ago"
