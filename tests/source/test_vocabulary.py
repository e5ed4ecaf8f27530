"""One vocabulary of states for the loader and the models (sql/vocabulary/*.csv).

The loader decides which command requests and operations it re-reads (`is_terminal`); the models
decide what counts as finished (`is_terminal_state`). Both read the same files; these tests fail
if either side stops doing so or reads them differently.
"""

from __future__ import annotations

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import create_macros, load_vocabulary
from esper_warehouse.simulator import catalog as C
from esper_warehouse.sources.esper.vocabulary import (
    device_state_code,
    device_state_text,
    device_states,
    is_terminal,
    tidy_state,
    work_states,
)

# The API's own texts, as the simulator serves them and as the spec spells them.
API_TEXTS = {
    "command": [*C.COMMAND_STATES, "Command TimeOut", "Command Cancelled", "Something New"],
    "operation": [
        *C.OPERATION_STATES,
        "OPERATION_SUCCESS",
        "SUCCEEDED",
        "CANCELED",
        "CANCELLED",
        "TIMEOUT",
        "operation_processing",
    ],
    "operation_device": [*C.OP_DEVICE_STATES, "SUCCEEDED", "CANCELLATION_REQUESTED", "TIMED_OUT"],
}
CASES = [(kind, text) for kind, texts in API_TEXTS.items() for text in texts]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    load_vocabulary(connection)
    create_macros(connection)
    return connection


@pytest.mark.parametrize(("kind", "text"), CASES, ids=[f"{k}:{t}" for k, t in CASES])
def test_python_and_sql_tidy_and_judge_a_state_alike(con, kind: str, text: str) -> None:
    state, terminal = con.execute(
        "select tidy_state(?, ?), is_terminal_state(tidy_state(?, ?))", [kind, text, kind, text]
    ).fetchone()
    assert (state, terminal) == (tidy_state(kind, text), is_terminal(kind, text))


def test_the_terminal_states_are_the_four_of_the_design() -> None:
    terminal = {state for state, final in work_states().values() if final}
    assert terminal == {"success", "failure", "timeout", "cancelled"}
    # every row of one tidy state agrees on whether it is final
    finals: dict[str, set[bool]] = {}
    for state, final in work_states().values():
        finals.setdefault(state, set()).add(final)
    assert all(len(v) == 1 for v in finals.values()), finals


def test_the_spec_s_typos_and_spellings_are_terminal() -> None:
    """SUCCEEDED was terminal only in Python and CANCELED only in SQL (issue 12, item 5)."""
    for kind, text in [
        ("operation", "SUCCEEDED"),
        ("operation", "CANCELED"),
        ("operation_device", "SUCCEDED"),
        ("command", "Command TimeOut"),
    ]:
        assert is_terminal(kind, text), (kind, text)
    assert not is_terminal("operation", "PROCESSING")


def test_device_states_follow_the_spec_enum() -> None:
    """Every code of the spec's DeviceStateEnum; wipe (70) and onboarding (80) are out of service."""
    assert set(device_states()) == {0, 1, 20, *range(30, 201, 10)}
    in_service = {code for code, (_, counted) in device_states().items() if counted}
    assert {1, 60} <= in_service
    assert not in_service & {20, 30, 40, 50, 70, 80, 90}


def test_onboarding_and_applying_a_blueprint_are_not_yet_in_service() -> None:
    """Esper's own tools: 80-100 'Onboarding', 110-190 'Applying Blueprint' (live section 22);
    200 registered and 60 inactive (unreachable, set by the cloud) count."""
    in_service = {code for code, (_, counted) in device_states().items() if counted}
    assert not in_service & set(range(80, 191, 10))
    assert {1, 60, 200} <= in_service
    assert device_states()[60][0] == "inactive"


@pytest.mark.parametrize(
    ("served", "code"),
    [
        (60, 60),
        ("60", 60),
        ("INACTIVE", 60),
        ("inactive", 60),
        ("Online", 1),
        ("disabled", 20),
        ("Wipe in progress", 70),
        ("WIPE_REQUESTED", 70),
        ("onboarding", 80),
        ("Onboarding Failed", 90),
        ("PROVISIONED", None),
        (None, None),
        ("", None),
    ],
)
def test_text_states_read_as_their_code(served: object, code: int | None) -> None:
    assert device_state_code(served) == code
    text = device_state_text(served)
    assert text == (served if isinstance(served, str) and served and not served.isdigit() else None)
    assert device_states()[70][0] == "wipe_in_progress"
    assert device_states()[80][0] == "onboarding_in_progress"
    assert (C.STATE_WIPE, C.STATE_ONBOARDING) == (70, 80)
