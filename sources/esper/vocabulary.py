"""State vocabularies, read from their one home: `sql/vocabulary/*.csv`.

The loader needs to know which command and operation states are terminal (it stops re-reading
them); the SQL models need the same answer (rollout progress, time to completion). Both read
`sql/vocabulary/work_states.csv`: here through `tidy_state` / `is_terminal`, in SQL through the
table `seeds.work_states` that the model build loads from the same file.
"""

from __future__ import annotations

import csv
import re
from functools import cache

from esper_warehouse import data_path

VOCABULARY_DIR = data_path("sql", "vocabulary")

_PREFIX = re.compile(r"^(COMMAND\s+|OPERATION_)")


def state_key(api_state: object) -> str:
    """The API's text as the vocabulary spells it: `Command In Progress` -> `IN_PROGRESS`.

    The SQL macro `state_key` in `sql/macros/macros.sql` does the same.
    """
    text = _PREFIX.sub("", str(api_state or "").strip().upper())
    return re.sub(r"\s+", "_", text)


def _rows(name: str) -> list[dict[str, str]]:
    with (VOCABULARY_DIR / name).open(newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return list(csv.DictReader(lines))


@cache
def work_states() -> dict[tuple[str, str], tuple[str, bool]]:
    """(kind, api_state) -> (tidy state, is_terminal), for command, operation, operation_device."""
    return {
        (row["kind"], row["api_state"]): (row["state"], row["is_terminal"] == "true")
        for row in _rows("work_states.csv")
    }


@cache
def device_states() -> dict[int, tuple[str, bool]]:
    """Device `state` code -> (name, is_in_service)."""
    return {
        int(row["code"]): (row["name"], row["is_in_service"] == "true")
        for row in _rows("device_states.csv")
    }


def _state_word(text: str) -> str:
    return re.sub(r"[\s-]+", "_", text.strip().lower())


@cache
def _state_aliases() -> tuple[dict[str, int], tuple[tuple[str, int], ...]]:
    """(exact words -> code, (prefix, code) pairs) from the names and aliases of the vocabulary."""
    exact: dict[str, int] = {}
    prefixes: list[tuple[str, int]] = []
    for row in _rows("device_states.csv"):
        code = int(row["code"])
        exact[_state_word(row["name"])] = code
        for alias in filter(None, (row.get("aliases") or "").split("|")):
            if alias.endswith("*"):
                prefixes.append((_state_word(alias[:-1]), code))
            else:
                exact[_state_word(alias)] = code
    return exact, tuple(prefixes)


def device_state_code(value: object) -> int | None:
    """The state code of a device record's `state`, whether served as a code or as text.

    `60`, `"60"` and `"INACTIVE"` all give 60; a text the vocabulary does not know gives None
    (the loader keeps the text in `state_text`, so nothing is lost).

    Raises:
        ValueError: neither a code nor a word (`1.5`, `true`, an object): the loader reads it as
            NULL and counts it (`arrow.Unreadable`), never as a code it was not.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"a {type(value).__name__} is not a device state")
    text = str(value).strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        if not number.is_integer():
            raise ValueError("not a whole state code")
        return int(number)
    word = _state_word(text)
    exact, prefixes = _state_aliases()
    if word in exact:
        return exact[word]
    return next((code for prefix, code in prefixes if word.startswith(prefix)), None)


def device_state_text(value: object) -> str | None:
    """The state as served when it was text rather than a code (`"inactive"`), else None."""
    if isinstance(value, str) and value.strip():
        try:
            float(value)
        except ValueError:
            return value
    return None


def tidy_state(kind: str, api_state: object) -> str:
    """The tidy state of an API state text (`unknown` when the vocabulary does not know it)."""
    return work_states().get((kind, state_key(api_state)), ("unknown", False))[0]


def is_terminal(kind: str, api_state: object) -> bool:
    """Whether a command status, operation or operation device can no longer change."""
    return work_states().get((kind, state_key(api_state)), ("unknown", False))[1]


@cache
def run_statuses() -> dict[str, tuple[bool, int | None]]:
    """A run's status -> (is_loaded, its exit code or None when it has several)."""
    return {
        row["status"]: (
            row["is_loaded"] == "true",
            int(row["exit_code"]) if row["exit_code"] else None,
        )
        for row in _rows("run_statuses.csv")
    }


def loaded_run_statuses() -> tuple[str, ...]:
    """The statuses of a run whose load is committed (`ok`, `partial`): they move "now"."""
    return tuple(status for status, (loaded, _code) in run_statuses().items() if loaded)
