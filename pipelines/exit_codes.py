"""The exit codes of every `esper-warehouse` command: their one home.

Every command returns one of these; docs/reference/exit-codes.md is written from `MEANING`
below (tests/pipeline/test_exit_codes.py keeps the two in step). A scheduler reads them: 0 and 6 mean
the night's data is loaded and committed (6 with a warning), anything else means it is not.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """What a command's exit code tells a scheduler."""

    OK = 0  # everything done (loaded and reconciled, built, exported, published)
    FAILED = 1  # an unexpected error, a model or data test that failed, a notebook cell that failed
    CONFIG = 2  # settings, key, enterprise id, base URL, a missing warehouse file, Postgres lost
    API = 3  # the API kept failing after retries
    DRIFT = 3  # `doctor`: an answer's shape would break a run (the API's fault, as for API)
    UNFINISHED = 4  # a reconciliation shortfall; `models`: a first load is unfinished
    LOCKED = 5  # the warehouse (or the published marts) stayed held by another process
    PARTIAL = 6  # loaded and committed, but some tables or parts skipped (doctor: a run would be)
    HELD_BACK = 7  # `status`: a table family held back by refusals longer than the warning age
    # `status`: the latest run loaded nothing (failed, interrupted, fell short, never ended), or
    # no run has loaded for longer than the warning age (a scheduler that stopped)
    NOT_LOADED = 8
    INTERRUPTED = 130  # Ctrl-C (SIGINT) or SIGTERM: 128 + SIGINT, as shells report it
    OUTPUT_CLOSED = 141  # stdout's reader stopped reading (`status | head`): 128 + SIGPIPE


LOADED = (Exit.OK, Exit.PARTIAL)  # the exit codes of a run whose load is committed

# A few words for each code, for `esper-warehouse --help` (`MEANING` says more).
BRIEF = {
    Exit.OK: "ok",
    Exit.FAILED: "unexpected error",
    Exit.CONFIG: "auth or configuration",
    Exit.API: "API failure (doctor: a shape that would break a run)",
    Exit.UNFINISHED: "reconciliation shortfall",
    Exit.LOCKED: "warehouse locked",
    Exit.PARTIAL: "partial run (loaded; some tables skipped)",
    Exit.HELD_BACK: "status: tables held back by refusals too long",
    Exit.NOT_LOADED: "status: the last night loaded nothing, or no load for too long",
    Exit.INTERRUPTED: "interrupted",
    Exit.OUTPUT_CLOSED: "output closed by its reader",
}


# What each code means, in full: docs/reference/exit-codes.md is written from this
# (`python -m esper_warehouse.pipelines.tools.table_docs`).
MEANING = {
    Exit.OK: ("everything loaded and reconciled"),
    Exit.FAILED: (
        "unexpected error (including a model or a data test that failed: the models are left "
        "as they were; and a full disk, which the message says: nothing of the step is "
        "committed)"
    ),
    Exit.CONFIG: (
        "configuration or authentication problem: key refused, wrong enterprise id or base "
        "URL (including `https://` to a port that does not speak TLS), a warehouse file named "
        "like the dataset, a dataset that belongs to another pipeline, a warehouse file that "
        "is not a DuckDB database or is damaged, a folder the warehouse cannot be written in, "
        "a folder at the warehouse's path or a path in a folder that does not exist (every "
        "command says the same of these); for `status`, `models`, `report`, `publish`: no "
        "such warehouse file; for `publish`: Postgres unreachable or its connection lost (at "
        "connect or mid-transaction; nothing is published)"
    ),
    Exit.API: (
        "the API kept failing after retries (5xx, 429, timeouts, malformed pages); for "
        "`doctor`: an answer's shape would break a run"
    ),
    Exit.UNFINISHED: (
        "reconciliation shortfall: fewer rows loaded than the API counts; for `models`: a "
        "first load is unfinished (nothing built)"
    ),
    Exit.LOCKED: (
        "`run`: another run held the warehouse's run lock past `lock_timeout_s` (`run not "
        "started (locked)`: nothing was done, nothing recorded), or the warehouse file stayed "
        "locked by another process past the deadline (`status`, `models`, `report`, "
        '`publish`: held at once, with the same message; `report` also when a page says "The '
        'warehouse is busy"; `publish`: also a mart stayed in use by another Postgres session '
        "past `--lock-timeout`)"
    ),
    Exit.PARTIAL: (
        "partial run: everything the key may read was loaded, reconciled and committed, but "
        "the API refused some tables (403/404 on a route after the key and enterprise id were "
        "proven, and the tables read from it), some devices' feeds or app lists or some "
        "records' own lists (400/403/404), or a Data Tap query was skipped (the tenant's "
        "quota, the run's request budget, a FAILED, CANCELED, CLOSED, truncated or late job); "
        "`status` names them, and the next run asks the refused parts again. A scheduler "
        "should treat it as loaded, with a warning. `run --tenant`/`--all-tenants`: 6 when a "
        "tenant was partial and none failed; `doctor`: a run would be partial (the routes and "
        "tables are listed)"
    ),
    Exit.HELD_BACK: (
        "`status` only: a table family has been held back by refusals for more than two "
        "scheduled nights (`freshness_warn_after_hours()`, 48 h of API time behind the latest "
        "run): its tables keep their rows and every number drawn from them says how old it is "
        '(docs/guide/warehouse.md, "How old is a number"); the family, its age and the refused route are on '
        "stderr. A morning check can alert on it"
    ),
    Exit.NOT_LOADED: (
        "`status` only: the last night did not load (its run failed, was interrupted, fell "
        "short of the API's counts, or never recorded its end: killed), or no run has loaded "
        "for more than `freshness_warn_after_hours()` (48 h) of wall-clock time; the cause "
        'and the last good load are on stderr, and 8 wins over 7 (docs/guide/scheduling.md, "Every morning")'
    ),
    Exit.INTERRUPTED: (
        "interrupted: Ctrl-C or SIGTERM; requests in flight stop at once, parts already "
        "committed stay, the run is recorded as interrupted (docs/troubleshooting.md)"
    ),
    Exit.OUTPUT_CLOSED: (
        "the program reading the output stopped reading (`esper-warehouse status | head`): "
        "the rest of the output is dropped, quietly. A `run` has finished and recorded itself "
        "by then; its own code is in `status`"
    ),
}


def brief() -> str:
    """`Exit codes: 0 ok, 1 unexpected error, ...`: one line for a command's help."""
    return "Exit codes: " + ", ".join(f"{int(code)} {BRIEF[code]}" for code in Exit) + "."
