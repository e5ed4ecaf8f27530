"""What every notebook shares: where the warehouse is, short-lived read-only queries, the
"no warehouse yet" message and the chart theme.

Notebooks import it as ``import _common as common`` (marimo puts the notebook's folder on
``sys.path``). Every query opens its own read-only DuckDB connection and closes it at once, so a
notebook left open never holds the lock the nightly load needs.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import altair as alt
import duckdb
import marimo as mo
import polars as pl
from esper_warehouse.pipelines import readable
from esper_warehouse.pipelines.build.model_files import macro_names
from esper_warehouse.pipelines.views import digest
from esper_warehouse.pipelines.views import headlines as headlines_module
from esper_warehouse.pipelines.views.offline import REPORT_DIR_ENV, TABLE_ROWS
from esper_warehouse.pipelines.warehouse import is_lock_error

WAREHOUSE_ENV = "ESPER_WAREHOUSE"
# Looked for in the current directory, then in the repository: the default of `esper-warehouse
# run` (a tenant's load), then the one `make demo` writes.
DEFAULT_FILES = ("esper_warehouse.duckdb", "demo.duckdb")
REPO_ROOT = Path(__file__).resolve().parent.parent
LOCK_WAIT_SECONDS = 20.0

ALL = "All"
# A device in no group: its group_path is NULL in the marts, and a page names it so rather than
# showing a blank name.
NO_GROUP = "(no group)"

VERDICTS = ["compliant", "non_compliant", "unverified", "out_of_service"]
VERDICT_COLORS = ["#2e8540", "#d83933", "#a9aeb1", "#5b616b"]
BUCKETS = ["online", "active", "stale", "offline", "missing", "never_seen"]
# A colour per known outcome; a state the vocabulary gains later still gets one (OTHER_COLORS).
_OUTCOME_COLOR = {"success": "#2e8540", "failure": "#d83933", "timeout": "#f08c3a",
                  "cancelled": "#8e44ad", "pending": "#a9aeb1"}  # fmt: skip
OTHER_COLORS = ["#1f77b4", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def _terminal_states(
    vocabulary: Path = REPO_ROOT / "sql" / "vocabulary" / "work_states.csv",
) -> list[str]:
    """The tidy terminal states of commands and operations, in first-seen order (the SQL's home)."""
    with vocabulary.open(newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return list(dict.fromkeys(r["state"] for r in rows if r["is_terminal"] == "true"))


# A rollout's outcomes: every terminal state of sql/vocabulary/work_states.csv, then "pending"
# (not yet terminal); the rollout marts have one `<outcome>_devices` column per outcome.
OUTCOMES = [*_terminal_states(), "pending"]
_extra = iter(OTHER_COLORS)
OUTCOME_COLORS = [_OUTCOME_COLOR.get(o) or next(_extra, "#333333") for o in OUTCOMES]


class WarehouseBusyError(RuntimeError):
    """The warehouse stayed locked by a writer (the nightly load) for longer than we wait."""


def warehouse_path() -> Path:
    """The warehouse file: ``$ESPER_WAREHOUSE``, else the first of ``DEFAULT_FILES`` found in the
    current directory or the repository that has models, else the first found
    (``./esper_warehouse.duckdb`` when there is none). The banner names the file read.

    A file without models (a failed first run's, `models` never run) is never read in place of
    one with them (`make demo`'s), whichever comes first.
    """
    configured = os.environ.get(WAREHOUSE_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    found = tuple(
        (folder / name, (folder / name).stat().st_mtime)
        for folder in dict.fromkeys((Path.cwd().resolve(), REPO_ROOT))
        for name in DEFAULT_FILES
        if (folder / name).exists()
    )
    return _first_with_models(found) if found else Path.cwd().resolve() / DEFAULT_FILES[0]


@functools.lru_cache(maxsize=8)
def _first_with_models(found: tuple[tuple[Path, float], ...]) -> Path:
    """The first of the files `found` (path, modified) that has models, else the first: asked
    once per set of files as modified (every query asks `warehouse_path`)."""
    return next((path for path, _ in found if _has_models(path)), found[0][0])


def _has_models(path: Path) -> bool:
    """True when the file has the marts, or cannot be asked (held by the nightly load, damaged):
    such a file is a warehouse, and its own page says why it cannot be read."""
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            row = con.execute(
                "select count(*) from information_schema.tables where table_schema = 'marts'"
            ).fetchone()
    except duckdb.Error:
        return True
    return bool(row and row[0])


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection, waiting (bounded) while the loader holds the write lock."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    delay = 0.2
    while True:
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.IOException as error:
            # The loader's own test of a lock (a damaged file's "checksum ... in block at
            # location ..." says "lock" too, and is no reason to wait).
            if not is_lock_error(error):
                raise
            if time.monotonic() >= deadline:
                raise WarehouseBusyError(
                    f"{path} is locked by a writer (probably the nightly load) for more than "
                    f"{LOCK_WAIT_SECONDS:.0f} s; re-run the cell when the load has finished."
                ) from error
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def query(sql: str, params: Sequence[Any] | None = None, path: Path | None = None) -> pl.DataFrame:
    """Run one query on a fresh read-only connection and return a polars frame."""
    with _connect(path or warehouse_path()) as con:
        return con.execute(sql, list(params or [])).pl()


def scalar(sql: str, params: Sequence[Any] | None = None, path: Path | None = None) -> Any:
    """The first value of the first row of a query (None when there is no row)."""
    with _connect(path or warehouse_path()) as con:
        row = con.execute(sql, list(params or [])).fetchone()
    return None if row is None else row[0]


def raw_table(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """A raw table's fully qualified name, safe even in a file named after the dataset
    (`esper.duckdb` holds a catalog `esper` too, which makes a bare `esper.<table>` ambiguous)."""
    (catalog,) = con.execute("select current_database()").fetchone()
    return f'"{catalog}".esper."{table}"'


@dataclass(frozen=True)
class Warehouse:
    """What a notebook needs to know before it queries: where, as of when, and what is missing."""

    path: Path
    problem: str | None = None
    tables: frozenset[str] = field(default_factory=frozenset)
    as_of: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def has(self, table: str) -> bool:
        return table in self.tables


def text(value: Any) -> str:
    """`value` as literal text inside `mo.md` (or HTML): for anything the notebook did not write.

    A value from the API (an alias, a name), a path or an error message may hold markup: `<img
    onerror=...>`, a markdown image that fetches a remote file, a backtick that closes a code
    span, `$` that starts a formula. Every character but letters, digits and spaces becomes a
    character reference, which markdown and HTML both show as that character and never read as
    syntax; `mo.md` renders it as it would any other text.
    """
    return "".join(c if c.isalnum() or c == " " else f"&#{ord(c)};" for c in str(value))


def code(value: Any) -> str:
    """`value` as literal text in a `<code>` span (a markdown code span would show the
    references of `text` as they are written)."""
    return f"<code>{text(value)}</code>"


def ident(name: str) -> str:
    """A column name from the API (a Data Tap result's) as a quoted SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def _problem(title: str, body: str) -> str:
    return f"### {title}\n\n{body}"


def open_warehouse(required: Sequence[str] = (), nonempty: str | None = None) -> Warehouse:
    """Check that the warehouse exists, holds the ``required`` tables or views (``schema.name``)
    and that ``nonempty`` has rows; describe what to do when it does not."""
    path = warehouse_path()
    how_to_point = (
        "Run `make demo` in the repository (it writes the demo warehouse there), or point the "
        f"notebook at a warehouse: `{WAREHOUSE_ENV}=/path/to/esper_warehouse.duckdb marimo edit …`."
    )
    if not path.exists():
        looked = (
            f"There is no file at {code(path)}."
            if os.environ.get(WAREHOUSE_ENV)
            else f"None of {', '.join(f'`{n}`' for n in DEFAULT_FILES)} is in {code(Path.cwd())} "
            f"or {code(REPO_ROOT)}."
        )
        return Warehouse(path, _problem("No warehouse yet", f"{looked}\n\n{how_to_point}"))
    try:
        with _connect(path) as con:
            names = con.execute(
                "select schema_name || '.' || table_name from duckdb_tables() "
                "union all select schema_name || '.' || view_name from duckdb_views() "
                "where not internal"
            ).fetchall()
            tables = frozenset(name for (name,) in names)
            as_of = None
            if "intermediate.int_as_of" in tables:  # the models' own "now"
                as_of = con.execute("select as_of from intermediate.int_as_of").fetchone()[0]
            elif "esper._esper_runs" in tables:
                as_of = con.execute(
                    f"select max(as_of) from {raw_table(con, '_esper_runs')} where status = 'ok'"
                ).fetchone()[0]
            missing = [name for name in required if name not in tables]
            macros = {
                name
                for (name,) in con.execute(
                    "select function_name from duckdb_functions() "
                    "where function_type in ('macro', 'table_macro') "
                    "and database_name = current_database()"
                ).fetchall()
            }
            rows = None
            if not missing and nonempty:
                rows = con.execute(f"select count(*) from {nonempty}").fetchone()[0]
    except WarehouseBusyError as error:
        return Warehouse(path, _problem("The warehouse is busy", text(error)))
    except duckdb.Error as error:
        return Warehouse(
            path, _problem("The warehouse cannot be read", f"{code(path)}: {text(error)}")
        )
    if missing:
        listed = ", ".join(f"`{name}`" for name in missing)
        body = (
            f"{code(path)} has no {listed} yet. Load it and build the models: "
            f"{code(f'esper-warehouse run --warehouse {path}')} (or `esper-warehouse models`)."
        )
        return Warehouse(path, _problem("The warehouse has no models yet", body), tables, as_of)
    if earlier := sorted(macro_names() - macros):
        body = (
            f"The models of {code(path)} were built by an earlier release of esper-warehouse "
            f"(no {', '.join(code(name) for name in earlier)}): rebuild them with "
            f"{code(f'esper-warehouse models --warehouse {path}')}, or wait for the next run."
        )
        problem = _problem("The models are from an earlier release", body)
        return Warehouse(path, problem, tables, as_of)
    if rows == 0:
        body = (
            f"{code(path)} has the models but `{nonempty}` has no rows: no device has been loaded "
            "yet. Run a load (`esper-warehouse run`) or `make demo`."
        )
        return Warehouse(path, _problem("The warehouse is empty", body), tables, as_of)
    return Warehouse(path, None, tables, as_of)


def banner(wh: Warehouse) -> mo.Html:
    """The notebook's first output: what it reads, or why it cannot."""
    if not wh.ok:
        return mo.callout(mo.md(wh.problem or ""), kind="warn")
    as_of = f" · data as of **{wh.as_of:%Y-%m-%d %H:%M} UTC**" if wh.as_of else ""
    return mo.md(f"Warehouse {code(wh.path)}{as_of} · read-only, one short connection per query")


def headline_value(row: dict[str, Any] | None) -> str:
    """A headline's value as a tile shows it: "1,234", "unknown" when a table family it reads was
    never loaded (never 0), "–" when the mart has no such row."""
    if row is None:
        return "–"
    if not row.get("is_known", True) or row["value"] is None:
        return "unknown"
    return f"{row['value']:,}"


def aged(row: dict[str, Any] | None, caption: str | None, *, markdown: bool = False) -> str | None:
    """A caption followed by the number's age (marts.headlines `age_note`), when the number is
    older than the run or unknown. `markdown`: the note is escaped for `mo.md` (it quotes routes
    and the API's reasons); `mo.stat` escapes its caption itself."""
    note = (row or {}).get("age_note")
    if not note:
        return caption
    note = text(note) if markdown else note
    return f"{caption} · {note}" if caption else note


def age_callout(row: dict[str, Any]) -> mo.Html:
    """What a section shows for a number that is unknown: the mart's words, e.g. "Pipelines:
    unknown (never loaded: GET /pipelines/v0/runs/ refused (403) since 2026-10-04)" (escaped)."""
    return mo.callout(mo.md(text(row.get("age_note") or "unknown")), kind="warn")


def freshness(path: Path | None = None) -> pl.DataFrame:
    """Each table family's freshness (intermediate.int_family_freshness): families behind or
    unknown first; empty for models an earlier release built."""
    try:
        return query(
            "select family_label as family, data_as_of, last_whole_load_at, age_note, "
            "held_back_by, is_held_back from intermediate.int_family_freshness "
            "order by is_known, not is_behind, family_label",
            path=path,
        )
    except duckdb.Error:
        return pl.DataFrame()


def freshness_block(path: Path | None = None) -> mo.Html:
    """The report's freshness block: every table family, the time its data is as of, its last
    whole load, and what keeps it back (the words of intermediate.int_family_freshness, as
    `status` prints them)."""
    families = freshness(path)
    if families.is_empty():
        return mo.md("")
    behind = families.filter(pl.col("age_note").is_not_null()).height
    title = (
        f"**Freshness**: {behind} of {families.height} table families older than the latest run "
        "or unknown; numbers drawn from them are judged at their own time and say so"
        if behind
        else f"**Freshness**: all {families.height} table families are as of the latest run"
    )
    shown = families.with_columns(
        pl.when(pl.col("is_held_back"))
        .then(pl.lit("held back: ") + pl.col("age_note"))
        .otherwise(pl.col("age_note").fill_null("current"))
        .alias("age_note")
    ).drop("is_held_back")
    return mo.vstack([mo.md(title), table(shown, "freshness", page_size=20)])


NOT_RECORDED = (
    "What changed overnight is not recorded in this warehouse: build the models "
    "(`esper-warehouse models`)."
)


def _nights(con: duckdb.DuckDBPyConnection, nights: int) -> int:
    """`nights`, or every night compared when 0 (at least 1: the digest's own default)."""
    if nights:
        return nights
    row = con.execute("select count(*) from changes.comparisons").fetchone()
    return max(int(row[0]) if row else 0, 1)


def changes_digest(nights: int = 1, path: Path | None = None) -> tuple[digest.Digest, str] | None:
    """What changed over the last `nights` compared (0: every night recorded), read as every
    surface reads it (`pipelines/views/digest.py`), with the vocabulary's words for a family not
    compared; None when the warehouse's models record no changes."""
    with _connect(path or warehouse_path()) as con:
        if not digest.has_mart(con):
            return None
        found = digest.read(con, nights=_nights(con, nights))
        return found, digest.not_compared_label(con)


def changes_block(path: Path | None = None) -> mo.Html:
    """The last night's changes as `status` and the report's index say them (escaped there)."""
    found = changes_digest(path=path)
    return mo.Html(digest.as_html(*found)) if found else nothing(NOT_RECORDED)


def change_rows(nights: int, path: Path | None = None) -> pl.DataFrame:
    """Every row of marts.fleet_changes over the last `nights` compared (0: every night
    recorded), newest night first, in the vocabulary's words and order."""
    with _connect(path or warehouse_path()) as con:
        rows = digest.rows(con, nights=_nights(con, nights))
    if not rows:
        return pl.DataFrame()
    frame = pl.DataFrame(rows, infer_schema_length=None)
    utc = {  # ISO text to "2026-10-03 00:00", the column saying UTC
        name: pl.col(name).str.slice(0, 16).str.replace("T", " ").alias(f"{name} (UTC)")
        for name in ("as_of", "since")
    }
    return frame.sort("as_of", descending=True, maintain_order=True).select(
        utc["as_of"],
        pl.col("change_label").alias("change"),
        pl.coalesce("subject_name", "subject_id").alias("subject"),
        "subject_kind",
        "before",
        "after",
        "reason",
        utc["since"],
    )


def nothing(message: str) -> mo.Html:
    """What a section shows when the warehouse has no rows for it."""
    return mo.callout(mo.md(message), kind="info")


def where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """A ``where`` clause and its parameters from ``{column_sql: value}``; ``ALL`` means no filter.

    A group filter keeps the group and its subgroups: pass the column as ``"group:<column>"``.
    """
    clauses, params = ["true"], []
    for column, value in filters.items():
        if value in (None, ALL):
            continue
        if column.startswith("group:"):
            name = column.removeprefix("group:")
            clauses.append(f"({name} = ? or starts_with({name}, ? || '/'))")
            params += [value, value]
        else:
            clauses.append(f"{column} = ?")
            params.append(value)
    return " and ".join(clauses), params


def dropdown(values: Sequence[Any], label: str, everything: str = ALL) -> mo.ui.dropdown:
    """A filter dropdown whose first choice keeps everything."""
    options = [everything, *[str(v) for v in values if v is not None]]
    return mo.ui.dropdown(options=options, value=everything, label=label)


def percent(value: float | None) -> str:
    """A 0-1 rate as a percentage with one decimal ("40.0 %"), blank when unknown."""
    return "" if value is None else f"{value:.1%}"


def rate_formats(frame: pl.DataFrame) -> dict[str, Any]:
    """Table formats that show every `*_rate` column of `frame` as a percentage, and every
    column of minutes (`*_to_final_state`, `time_*`) as a readable duration (`2.5 days`)."""
    return {
        **{c: percent for c in frame.columns if c.endswith("_rate")},
        **{
            c: readable.duration
            for c in frame.columns
            if c.endswith("_to_final_state") or c.startswith("time_")
        },
    }


# The bars a top-N chart draws at most (the same rule on every page): a longer list is cut to
# its first CHART_ITEMS, and its title says so (`titled`).
CHART_ITEMS = 30


def titled(title: str, shown: int, total: int, rest: str = "") -> str:
    """The title of a chart or a table that lists `shown` of the `total` items of its list:
    `title` as is when it shows them all, else "title (N of M; rest)" (`readable.shown_of`, the
    words every surface uses), `rest` saying where the others are."""
    cut = readable.shown_of(shown, total)
    if not cut:
        return title
    return f"{title} ({cut}" + (f"; {rest}" if rest else "") + ")"


def top(
    frame: pl.DataFrame, title: str, rest: str, n: int = CHART_ITEMS
) -> tuple[pl.DataFrame, str]:
    """The first `n` rows of `frame` (in the order the chart ranks them) and the chart's title,
    which says "N of M" when that leaves rows out (`titled`)."""
    return frame.head(n), titled(title, min(n, frame.height), frame.height, rest)


def label_parts(label: str) -> tuple[str, str]:
    """A `marts.headlines` label split into what it counts and what it is out of, so a page
    shows the mart's words and types none: "Compliant (of devices in service)" is
    ("Compliant", "devices in service"); "Not seen for more than 24 h (or never)" is
    ("Not seen for more than 24 h", "or never"); a label without brackets is (label, "")."""
    found = re.fullmatch(r"(.*?) \((?:of )?(.*)\)", label)
    return (found.group(1), found.group(2)) if found else (label, "")


def table(
    frame: pl.DataFrame,
    name: str,
    *,
    total: int | None = None,
    whole_sql: str | None = None,
    label: str = "",
    **options: Any,
) -> mo.ui.table:
    """`frame` as a table: paged in a notebook; in the report (`$ESPER_REPORT_DIR` set by
    `esper-warehouse report`) with every row in the page, up to `TABLE_ROWS`.

    A longer table (more rows than `TABLE_ROWS`, or a `total` larger than `frame`'s, whose rows
    `whole_sql` selects) says "first N of M" in its label and, in the report, is written whole
    as `<name>.csv` beside the page and linked from it.
    """
    total = max(total or 0, frame.height)
    folder = os.environ.get(REPORT_DIR_ENV)
    if folder:
        shown, options = frame.head(TABLE_ROWS), {**options, "pagination": False}
        options.pop("page_size", None)
    else:
        shown = frame
    notes = [label] if label else []
    if total > shown.height:
        notes.append(f"first {readable.shown_of(shown.height, total)} rows")
        if folder:
            target = Path(folder) / f"{name}.csv"
            if whole_sql is None:
                frame.write_csv(target)
            else:
                with _connect(warehouse_path()) as con:
                    quoted = str(target).replace("'", "''")
                    con.execute(f"copy ({whole_sql}) to '{quoted}' (header)")
            notes.append(f"every row: [{text(target.name)}]({text(target.name)})")
    return mo.ui.table(shown, label=" · ".join(notes), **options)


def ranked_from_devices() -> int:
    """The fewest target devices of a rollout the marts rank among the worst
    (`headlines.ranked_from_devices`, on a connection of its own)."""
    with _connect(warehouse_path()) as con:
        return headlines_module.ranked_from_devices(con)


def worst_rollouts(
    view: pl.DataFrame, noun: str, ranked_from: int
) -> tuple[mo.ui.table, mo.ui.table]:
    """The two pickable tables of a rollout list: the ranked ones, most failing first, and every
    one, slowest first (every row: a notebook pages them, the report closes all but the first).

    `view` needs `failing_rank` (the marts' one ranking: failure + timeout rate among rollouts to
    `ranked_from` devices or more, `ranked_from_devices()`; the three first of commands are
    marts.headlines `worst_command_rollouts`) and `p90_minutes_to_terminal`; `noun` names the
    rows ("command requests", "operations").
    """
    view = view.rename(
        {c: c.replace("_minutes_to_terminal", "_to_final_state") for c in view.columns}
    )
    formats = rate_formats(view)
    failing = table(
        view.filter(pl.col("failing_rank").is_not_null()).sort("failing_rank"),
        f"most_failing_{noun.replace(' ', '_')}",
        format_mapping=formats,
        selection="single",
        page_size=10,
        label=f"Most failing {noun} to {ranked_from} devices or more (failure + timeout rate)",
    )
    slow = table(
        view.sort("p90_to_final_state", descending=True, nulls_last=True),
        f"slowest_{noun.replace(' ', '_')}",
        format_mapping=formats,
        selection="single",
        page_size=10,
        label=f"Slowest {noun} (p90 time to a final state)",
    )
    return failing, slow


def headlines(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The whole fleet's headline numbers (marts.headlines: their one home), by name; items of a
    list under ``"<headline>/<item>"``. A notebook shows these and counts none of its own.

    Each row carries `age_note` (how old the number is, or why it is unknown: None when current)
    and `is_known` (False: the number is NULL, never 0)."""
    frame = query(
        "select headline, item, item_rank, label, value, denominator, share, age_note, is_known "
        "from marts.headlines order by headline, item_rank nulls first",
        path=path,
    )
    return {
        row["headline"] + (f"/{row['item']}" if row["item"] is not None else ""): row
        for row in frame.iter_rows(named=True)
    }


def last_seen_buckets(path: Path | None = None) -> list[dict[str, Any]]:
    """The admin's last-seen buckets (staging.stg_seeds__last_seen_buckets, typed from
    `last_seen_buckets.csv`: their one home), by upper bound; `max_hours` None: no upper bound.
    A page words its boundaries from these, never from numbers of its own."""
    return query(
        "select last_seen_bucket, max_hours, is_counted_as_seen "
        "from staging.stg_seeds__last_seen_buckets order by max_hours nulls last",
        path=path,
    ).to_dicts()


def hours(value: float) -> str:
    """Hours as a page words them (`readable.duration`: 1 h, 7 days)."""
    return readable.duration(value * 60)


def skipped_by_last_run(path: Path | None = None) -> dict[str, str]:
    """The tables the latest load skipped, with why (`_esper_runs.unavailable`: a refused scope,
    a route the tenant lacks); empty when it skipped none or no load is recorded."""
    with _connect(path or warehouse_path()) as con:
        if not con.execute(
            "select count(*) from duckdb_columns() where schema_name = 'esper' "
            "and table_name = '_esper_runs' and column_name = 'unavailable'"
        ).fetchone()[0]:
            return {}
        row = con.execute(
            f"select unavailable from {raw_table(con, '_esper_runs')} "
            "order by started_at desc limit 1"
        ).fetchone()
    return json.loads(row[0]) if row and row[0] else {}


def picked_row(failing: mo.ui.table, slow: mo.ui.table) -> tuple[Any, Any]:
    """(id, label) of the row picked in either table; the most failing one when none is."""
    first = failing.data if failing.data.height else slow.data  # no rollout to 5 devices yet
    picked = next((t.value for t in (failing, slow) if t.value.height), first.head(1))
    return picked["id"][0], picked["label"][0]


def _theme() -> alt.theme.ThemeConfig:
    font = "Inter, Helvetica Neue, Arial, sans-serif"
    return alt.theme.ThemeConfig(
        config={
            "font": font,
            "view": {"stroke": None, "continuousWidth": 560, "continuousHeight": 260},
            "title": {"fontSize": 15, "anchor": "start", "subtitleColor": "#5c5c5c"},
            "axis": {
                "labelFontSize": 11,
                "titleFontSize": 12,
                "titleColor": "#3d3d3d",
                "gridColor": "#ececec",
                "domainColor": "#b0b0b0",
            },
            "legend": {"labelFontSize": 11, "titleFontSize": 12, "orient": "top"},
            "range": {
                "category": [
                    "#2f6fb0",
                    "#e07b39",
                    "#3a9e6f",
                    "#8e5ea2",
                    "#c94c4c",
                    "#5aa9c9",
                    "#b59b2d",
                    "#7a7a7a",
                ]
            },
            "background": "white",
        }
    )


alt.theme.register("esper", enable=True)(_theme)


def verdict_color(title: str = "Verdict", verdicts: Sequence[str] = VERDICTS) -> alt.Color:
    """The verdicts' colours (`verdicts`: those the chart draws, in their order)."""
    colour = dict(zip(VERDICTS, VERDICT_COLORS, strict=True))
    return alt.Color(
        "verdict:N",
        title=title,
        scale=alt.Scale(domain=list(verdicts), range=[colour[v] for v in verdicts]),
        sort=list(verdicts),
    )


def outcome_color() -> alt.Color:
    return alt.Color(
        "outcome:N",
        title="Outcome",
        scale=alt.Scale(domain=OUTCOMES, range=OUTCOME_COLORS),
        sort=OUTCOMES,
    )
