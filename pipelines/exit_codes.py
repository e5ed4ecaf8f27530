"""The exit codes of every `esper-warehouse` command: their one home.

Every command returns one of these; README's "exit code" table lists exactly these values
(tests/pipeline/test_exit_codes.py keeps the two in step). A scheduler reads them: 0 and 6 mean
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

# A few words for each code, for `esper-warehouse --help` (README's table says more).
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


def brief() -> str:
    """`Exit codes: 0 ok, 1 unexpected error, ...`: one line for a command's help."""
    return "Exit codes: " + ", ".join(f"{int(code)} {BRIEF[code]}" for code in Exit) + "."
