"""`esper-warehouse status`: the last runs, every table's rows and freshness, reconciliation."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import orjson

from .. import readable
from ..bookkeeping import unfinished_first_load, unreadable_lines
from ..exit_codes import Exit
from ..warehouse import DEMO_WAREHOUSE, file_problem, path_problem
from . import digest, headlines
from .morning import night_alarm


def missing_message(warehouse: Path) -> str:
    """What `status`, `models`, `report` and `publish` say about a warehouse file that is not
    there; beside the demo's file, how to read that one (never read in its place). A path in
    a folder that does not exist says so (`path_problem`), as every command does."""
    if (problem := path_problem(warehouse)) is not None:
        return problem[1]
    text = (
        f"there is no warehouse file {warehouse.expanduser().resolve()}; run `esper-warehouse "
        "run` (or `demo`) first, or pass --warehouse with the file's path"
    )
    return text + _beside_the_demo(warehouse)


def _beside_the_demo(warehouse: Path) -> str:
    demo = warehouse.parent / DEMO_WAREHOUSE.name
    if warehouse.name != DEMO_WAREHOUSE.name and demo.is_file():
        return f" (the demo's warehouse {demo} is here: read it with --warehouse {demo})"
    return ""


def no_run_message(con: duckdb.DuckDBPyConnection, warehouse: Path, dataset: str) -> str | None:
    """What `status` and `report` say (exit 2) of a warehouse no run has recorded itself in nor
    loaded a device into (`models --create` made it), with the command to run; else None.

    Such a file has nothing to show: `status` would list empty sections, `report` would write
    "no models yet" pages over a good report, both with exit 0.
    """
    tables = {
        name
        for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = ? "
            "and table_name in ('_esper_runs', 'devices')",
            [dataset],
        ).fetchall()
    }
    # a run recorded, or devices a killed first load committed (it had no time to record)
    for table in sorted(tables):
        if con.execute(f'select count(*) from "{dataset}"."{table}"').fetchone()[0]:  # type: ignore[index]
            return None
    return (
        f"no run has loaded {warehouse} yet: run `esper-warehouse run --warehouse {warehouse}` "
        "first (or `esper-warehouse demo`)" + _beside_the_demo(warehouse)
    )


def open_failure(warehouse: Path, error: BaseException) -> tuple[int, str]:
    """The exit code and message for a warehouse DuckDB cannot open (`file_problem`: held by
    another process, damaged, on a full disk or in a folder that cannot be written)."""
    if (problem := file_problem(warehouse, error)) is not None:
        return problem
    return Exit.FAILED, f"{warehouse}: cannot open it ({error})"


def status(warehouse: Path, dataset: str = "esper") -> int:
    """Print the warehouse's state; opens the file read-only, briefly. The morning alarm.

    Exit codes: 0; 8 the latest run loaded nothing (failed, interrupted, fell short, never ended)
    or no run has loaded for longer than `freshness_warn_after_hours()` of wall-clock time (a
    scheduler that stopped), the cause and the last good load on stderr; 7 a table family held
    back by refusals longer than that age (8 wins when both hold); 2 no such file or no run
    recorded in it, 5 held by another process, 1 any other failure to open it.
    """
    if not warehouse.exists():
        print(f"error: {missing_message(warehouse)}", file=sys.stderr)
        return Exit.CONFIG
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error as error:
        code, message = open_failure(warehouse, error)
        print(f"error: {message}", file=sys.stderr)
        return code
    try:
        if (empty := no_run_message(con, warehouse, dataset)) is not None:
            print(f"error: {empty}", file=sys.stderr)
            return Exit.CONFIG
        print(render(con, dataset))
        held = [f for f in freshness(con) if f.is_held_back]
        alarm = night_alarm(con, warehouse, dataset)
    finally:
        con.close()
    for family in held:
        print(
            f"warning: {family.label} held back: {family.note} (more than "
            f"{family.warn_after_hours:g} h behind the latest run)",
            file=sys.stderr,
        )
    for line in alarm:
        print(line, file=sys.stderr)
    if alarm:
        return Exit.NOT_LOADED
    return Exit.HELD_BACK if held else Exit.OK


@dataclass(frozen=True)
class Freshness:
    """One table family's row of intermediate.int_family_freshness."""

    family: str
    label: str
    data_as_of: datetime | None
    last_whole_load_at: datetime | None
    held_back_by: str | None
    is_held_back: bool
    note: str | None  # age_note: None when current
    warn_after_hours: float


def freshness(con: duckdb.DuckDBPyConnection) -> list[Freshness]:
    """Each table family's freshness (intermediate.int_family_freshness), families held back or
    unknown first; none when the models are not built (or were built by an earlier release)."""
    try:
        rows = con.execute(
            "select family, family_label, data_as_of, last_whole_load_at, held_back_by, "
            "is_held_back, age_note, freshness_warn_after_hours() "
            "from intermediate.int_family_freshness "
            "order by is_known, not is_behind, family_label"
        ).fetchall()
    except duckdb.Error:
        return []
    return [Freshness(*row) for row in rows]


def freshness_lines(con: duckdb.DuckDBPyConnection) -> list[str]:
    """`status`'s freshness block: each table family, the API time it is as of, its last whole
    load and what keeps it back (the words of intermediate.int_family_freshness)."""
    families = freshness(con)
    if not families:
        return []
    width = max(len(f.label) for f in families)
    lines = [
        "freshness (API time each table family is as of; numbers drawn from it are judged there):"
    ]
    for f in families:
        if f.note:  # behind or unknown: the mart's words, then the tables that keep it back
            state = f"{'HELD BACK: ' if f.is_held_back else ''}{f.note}; tables: {f.held_back_by}"
        else:
            state = f"as of {f.data_as_of:%Y-%m-%d %H:%M} UTC (current)"
        whole = (
            f"; last whole load {f.last_whole_load_at:%Y-%m-%d %H:%M} UTC"
            if f.last_whole_load_at and f.last_whole_load_at != f.data_as_of
            else ""
        )
        lines.append(f"  {f.label:<{width}}  {state}{whole}")
    return lines


def _tables(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    rows = con.execute(
        "select table_name from information_schema.tables where table_schema = ? "
        "order by table_name",
        [dataset],
    ).fetchall()
    return [r[0] for r in rows]


def _unavailable(con: duckdb.DuckDBPyConnection, ds: str) -> list[str]:
    """The tables (and device feeds) the latest run skipped, with why (a partial run)."""
    has_column = con.execute(
        f"select count(*) from (describe {ds}._esper_runs) where column_name = 'unavailable'"
    ).fetchone()[0]  # type: ignore[index]
    if not has_column:  # a warehouse recorded before partial runs existed
        return []
    row = con.execute(
        f"select unavailable from {ds}._esper_runs order by started_at desc limit 1"
    ).fetchone()
    skipped = orjson.loads(row[0]) if row and row[0] else {}
    if not skipped:
        return []
    lines = ["unavailable in the last run (skipped, not failed):"]
    lines += [f"  {table}: {why}" for table, why in sorted(skipped.items())]
    return lines


def _unreadable(con: duckdb.DuckDBPyConnection, ds: str) -> list[str]:
    """The values the latest run could not read (loaded as NULL), counted per column."""
    has_column = con.execute(
        f"select count(*) from (describe {ds}._esper_runs) where column_name = 'unreadable'"
    ).fetchone()[0]  # type: ignore[index]
    if not has_column:  # a warehouse recorded before unreadable values were counted
        return []
    row = con.execute(
        f"select unreadable from {ds}._esper_runs order by started_at desc limit 1"
    ).fetchone()
    counts = orjson.loads(row[0]) if row and row[0] else {}
    return [f"  {line}" for line in unreadable_lines(counts)] if counts else []


def expiring_credentials(
    con: duckdb.DuckDBPyConnection, numbers: headlines.Headlines | None = None
) -> list[str]:
    """The credentials expired or expiring within their kind's threshold (marts.credential_expiry),
    soonest first, then those whose served expiry cannot be read, under their count
    (marts.headlines `credentials_needing_action`); none when the marts are not built yet."""
    numbers = numbers or headlines.read(con)
    total = numbers.number("credentials_needing_action") if numbers else None
    title = "credentials expired or expiring (marts.credential_expiry)"
    if total is not None and not total.is_known:
        return [f"{title}: {total.age_note}"]
    if total is None or not total.value:
        return []
    rows = con.execute(
        f"select credential_kind, credential_name, expires_at, days_left, status, "
        f"stops_when_expired, expires_as_served from {headlines.marts(con)}.credential_expiry "
        "where status in ('expired', 'expiring', 'unreadable') "
        "order by expires_at nulls last, credential_kind, credential_name"
    ).fetchall()
    counts = ", ".join(f"{r.value:,} {r.item}" for r in numbers.items("credentials_needing_action"))  # type: ignore[union-attr]
    lines = [total.aged(f"{title}: {total.value:,} ({counts})")]
    for kind, name, expires, days, state, stops, served in rows:
        when = f"{expires:%Y-%m-%d} ({_when(days)})" if expires else f"expiry served as {served!r}"
        lines.append(f"  {state:<9} {kind:<21} {name}  {when}: {stops}")
    return lines


def _when(days: int) -> str:
    """A credential's `days_left` in words: `in 3 days`, `today`, `1 day ago`."""
    if days == 0:
        return "today"
    count = f"{abs(days)} day{'' if abs(days) == 1 else 's'}"
    return f"{count} ago" if days < 0 else f"in {count}"


def drift_disagreements(numbers: headlines.Headlines | None) -> list[str]:
    """How many devices Esper and the warehouse judge differently (marts.headlines
    `drift_disagreements`), by kind of disagreement; none when they agree or no marts."""
    total = numbers.number("drift_disagreements") if numbers else None
    title = "devices whose drift verdicts differ (marts.drift_disagreements)"
    if total is not None and not total.is_known:
        return [f"{title}: {total.age_note}"]
    if total is None or not total.value:
        return []
    counts = ", ".join(f"{r.value:,} {r.item}" for r in numbers.items("drift_disagreements"))  # type: ignore[union-attr]
    return [total.aged(f"{title}: {total.value:,} ({counts})")]


def security_disagreements(numbers: headlines.Headlines | None) -> list[str]:
    """How many devices Esper's security verdict and the warehouse's patch check judge
    differently (marts.headlines `security_disagreements`), by kind; none when they agree."""
    total = numbers.number("security_disagreements") if numbers else None
    title = "devices whose security verdicts differ (marts.security_disagreements)"
    if total is not None and not total.is_known:
        return [f"{title}: {total.age_note}"]
    if total is None or not total.value:
        return []
    counts = ", ".join(f"{r.value:,} {r.item}" for r in numbers.items("security_disagreements"))  # type: ignore[union-attr]
    return [total.aged(f"{title}: {total.value:,} ({counts})")]


def slowest_app_rollout(numbers: headlines.Headlines | None) -> list[str]:
    """The slowest app version rollout in progress (marts.headlines `slowest_app_rollout`, its
    label naming the app, the version and its days), its devices on it out of those with the
    app; none when no rollout is in progress."""
    slowest = numbers.number("slowest_app_rollout") if numbers else None
    if slowest is not None and not slowest.is_known:
        return [f"slowest app rollout in progress (marts.app_version_rollout): {slowest.age_note}"]
    if slowest is None or slowest.denominator is None:
        return []
    return [slowest.aged(f"{slowest.label}: {headlines.of(slowest)} (marts.headlines)")]


def destructive_access(numbers: headlines.Headlines | None) -> list[str]:
    """Who may wipe, reboot or lock devices (marts.headlines, from marts.fleet_access), counted
    over active users, and how many users' scopes are unknown; none when no user was loaded."""
    wipe = numbers.number("users_may_wipe") if numbers else None
    if wipe is not None and not wipe.is_known:
        return [f"active users who may wipe devices (marts.fleet_access): {wipe.age_note}"]
    if numbers is None or wipe is None or not wipe.denominator:
        return []
    any_ = numbers.number("users_may_wipe_reboot_or_lock")
    unknown = numbers.number("users_scopes_unknown")
    line = (
        f"active users who may wipe devices (marts.fleet_access): {headlines.of(wipe)}; "
        f"wipe, reboot or lock: {any_.value if any_ else 0:,}"
    )
    line += f"; scopes unknown for {unknown.value:,}" if unknown and unknown.value else ""
    return [wipe.aged(line)]


def low_battery(numbers: headlines.Headlines | None) -> list[str]:
    """Devices whose battery is low (marts.headlines `low_battery_devices`), beside Esper's own
    counter of its console (`esper_low_battery_devices`), which is defined apart."""
    low = numbers.number("low_battery_devices") if numbers else None
    if numbers is None or low is None or not low.denominator:
        return []
    esper = numbers.number("esper_low_battery_devices")
    console = (
        f"; Esper's console counter: {esper.aged(f'{esper.value:,}')}"
        if esper and esper.value is not None
        else ""
    )
    return [low.aged(f"{low.label}: {headlines.of(low)} (marts.headlines{console})")]


def compliance(numbers: headlines.Headlines | None) -> list[str]:
    """The compliance rate over devices in service and the devices not seen (marts.headlines,
    each under its label); none when the marts are not built or hold no device."""
    rate = numbers.number("compliance_rate") if numbers else None
    if numbers is None or rate is None or not rate.denominator:
        return []
    unseen = numbers.number("not_seen_devices")
    return [
        rate.aged(
            f"compliant devices (marts.headlines): {headlines.of(rate)} in service "
            f"({headlines.share(rate)})"
        ),
        *(
            [unseen.aged(f"{unseen.label}: {headlines.of(unseen)} (marts.headlines)")]
            if unseen
            else []
        ),
    ]


def pipeline_runs(numbers: headlines.Headlines | None) -> list[str]:
    """Esper Pipelines runs not yet ended that need a look (marts.headlines, each count under its
    label, which names its threshold): waiting for an approval, stalled, failing, each run named
    under its count with the stage it is held at; none when no run is open (or Pipelines is not
    loaded)."""
    waiting = numbers.number("pipeline_runs_waiting") if numbers else None
    title = "Esper Pipelines runs not ended (marts.pipeline_rollout)"
    if waiting is not None and not waiting.is_known:
        return [f"{title}: {waiting.age_note}"]
    if numbers is None or waiting is None or not waiting.denominator:
        return []
    lines = [waiting.aged(f"{title}: {waiting.denominator:,}")]
    for kind in ("waiting", "stalled", "failing"):
        count = numbers.number(f"pipeline_runs_{kind}")
        if count is not None:
            lines.append(f"  {count.label}: {count.value:,}")
            lines += [f"    {_held_run(kind, run)}" for run in numbers.items(count.headline)]
    return lines


def _held_run(kind: str, run: headlines.Headline) -> str:
    """One run under its count: the stage it is held at and for how long, or its failures."""
    if kind == "failing":
        return f"{run.label}: {run.value:,} of {run.denominator:,} devices failed or timed out"
    waited = "for" if kind == "waiting" else "no change for"
    return f"{run.label} ({waited} {readable.duration(run.value)})"


def morning_check(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What an admin checks first (marts.headlines): credentials that stop management, drift
    and security verdicts that differ, who may send destructive commands, devices about to go
    flat, rollouts that wait or fail, the slowest app rollout in progress."""
    numbers = headlines.read(con)
    return [
        *expiring_credentials(con, numbers),
        *drift_disagreements(numbers),
        *security_disagreements(numbers),
        *destructive_access(numbers),
        *low_battery(numbers),
        *pipeline_runs(numbers),
        *slowest_app_rollout(numbers),
    ]


def _pacing_columns(con: duckdb.DuckDBPyConnection, ds: str) -> str:
    """The pacing columns of `_esper_runs`, or NULLs in a warehouse recorded before them."""
    names = {row[0] for row in con.execute(f"describe {ds}._esper_runs").fetchall()}
    wanted = ("answered", "not_ours", "answered_per_s")
    return ", ".join(name if name in names else f"null as {name}" for name in wanted)


def render(con: duckdb.DuckDBPyConnection, dataset: str) -> str:
    tables = _tables(con, dataset)
    catalog = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
    ds = f'"{catalog}"."{dataset}"'  # a file named like the dataset makes `esper.x` ambiguous
    out: list[str] = []
    if unfinished := unfinished_first_load(con, ds):
        out.append(unfinished)
    runs = []
    if "_esper_runs" in tables:  # empty until the first run (pipelines/build/models.py)
        runs = con.execute(
            f"select started_at, as_of, mode, status, requests, retries, throttled, "
            f"{_pacing_columns(con, ds)} "
            f"from {ds}._esper_runs order by started_at desc limit 10"
        ).fetchall()
    if runs:
        (recorded,) = con.execute(f"select count(*) from {ds}._esper_runs").fetchone()  # type: ignore[misc]
        cut = readable.shown_of(len(runs), recorded)
        out.append(f"last runs ({cut}; all in esper._esper_runs):" if cut else "last runs:")
        for row in runs:
            out.append(
                f"  {row[0]:%Y-%m-%d %H:%M}  "
                + (f"as of {row[1]}" if row[1] is not None else "no API time")
                + f"  {row[2] or '-':<11} {row[3]:<22} "
                f"requests {row[4]}, retries {row[5]}, 429s {row[6]}"
                + (f" ({row[8]} not this run's)" if row[8] else "")
                + (f", answered {row[7]} at {row[9]:.1f}/s" if row[9] else "")
            )
    else:
        out.append("no runs recorded yet")
    out.extend(_unavailable(con, ds) if runs else [])
    out.extend(freshness_lines(con) if runs else [])
    if runs and (unreadable := _unreadable(con, ds)):
        out += ["values the last run could not read (loaded as NULL):", *unreadable]
    out.extend(digest.status_block(con) if runs else [])
    out.extend(compliance(headlines.read(con)))
    out.extend(morning_check(con))
    out.append("tables (whole table: all rows it holds, last loaded):")
    loads = "_dlt_loads" in tables
    for table in tables:
        if table.startswith("_"):
            continue
        columns = {
            r[0]
            for r in con.execute(
                "select column_name from information_schema.columns "
                "where table_schema = ? and table_name = ?",
                [dataset, table],
            ).fetchall()
        }
        count = con.execute(f'select count(*) from {ds}."{table}"').fetchone()[0]
        fresh = ""
        if loads and "_dlt_load_id" in columns:
            fresh = con.execute(
                f'select max(l.inserted_at) from {ds}."{table}" t '
                f"join {ds}._dlt_loads l on l.load_id = t._dlt_load_id"
            ).fetchone()[0]
        out.append(f"  {table:<28} {count:>10,}  {fresh or ''}")
    if "_esper_reconciliation" in tables:
        out.append(
            "reconciliation (latest run only: rows the API announced and rows that run loaded;"
            " not the table totals above):"
        )
        for row in con.execute(
            f"select table_name, expected, loaded, missing, ok from "
            f"{ds}._esper_reconciliation where run_id = (select run_id from "
            f"{ds}._esper_reconciliation order by checked_at desc limit 1) order by 1"
        ).fetchall():
            flag = "ok" if row[4] else "SHORT"
            out.append(f"  {row[0]:<28} this run: expected {row[1]:>8}  loaded {row[2]:>8}  {flag}")
    return "\n".join(out)
