"""The conversion rule behind "values never end the night" (issue 32, item 4), type by type.

Every declared type reads the forms the API may serve and turns anything else into NULL, counted
per `table.column` (`arrow.Unreadable`); a key or cursor value that cannot be read is an error
naming the column (exit 3). The pipeline tests (`tests/pipeline/test_unreadable_values.py`) run
the same rule end to end against the simulator.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from esper_warehouse.pipelines.run.failures import error_text, exit_code_for
from esper_warehouse.sources.esper.arrow import UnreadableKey
from esper_warehouse.sources.esper.run.ledger import RunLedger
from esper_warehouse.sources.esper.table import BOOL, INT, TS, Col, Table
from esper_warehouse.sources.esper.times import parse_time
from esper_warehouse.sources.esper.vocabulary import device_state_code

PROBE = Table(
    "probe",
    "/probe/",
    ("id",),
    "updated_at",
    columns=(
        Col("id"),
        Col("updated_at", TS),
        Col("n", INT),
        Col("x", "double"),
        Col("flag", BOOL),
        Col("at", TS),
        Col("label"),
        Col("state", INT, convert=device_state_code),
    ),
)
T = datetime(2026, 9, 21, 14, 13, 20, tzinfo=UTC)  # 1790000000 s after the epoch


def _load(field: str, values: list[Any]) -> tuple[list[Any], dict[str, int]]:
    ledger = RunLedger()
    tally = ledger.unreadable
    rows = [
        {"id": str(i), "updated_at": "2026-01-01T00:00:00Z", field: v} for i, v in enumerate(values)
    ]
    page = PROBE.page(rows, ledger)
    return page.column(field).to_pylist(), tally.counts()


@pytest.mark.parametrize(
    ("field", "served", "read"),
    [
        # whole numbers: text of one is one; a fraction is never truncated; a flag is no number
        ("n", [1, "2", 3.0, " 4.0 ", 1.5, "high", True, 2**64, None, ""],
         [1, 2, 3, 4, None, None, None, None, None, None]),
        ("x", [1, "2.5", 0.5, "n/a", False], [1.0, 2.5, 0.5, None, None]),
        ("flag", [True, "false", "Yes", 1, 0, "maybe", 2, 1.5],
         [True, False, True, True, False, None, None, None]),
        ("at", ["2026-09-21T14:13:20Z", "2026-09-21T16:13:20+02:00", 1790000000, 1790000000000,
                "1790000000000", "2026-09-21T14:13:20", "0000-00-00T00:00:00Z", "next spring",
                "+275760-09-13T00:00:00Z", 20260210, True],
         [T, T, T, T, T, T, None, None, None, None, None]),
        # the vocabulary's codes: a code, its text, a word it knows; 1.5 and a flag are none
        ("state", [60, "60", "INACTIVE", "not-a-state-we-know", 1.5, True, {"code": 1}],
         [60, 60, 60, None, None, None, None]),
        ("label", ["a", 7, {"b": 1}], ["a", "7", '{"b":1}']),  # text reads anything
    ],
)  # fmt: skip
def test_each_type_reads_what_it_can_and_counts_the_rest(
    field: str, served: list[Any], read: list[Any]
) -> None:
    values, counts = _load(field, served)

    assert values == read
    # NULLs served as NULL (or empty text) are absent values, not unreadable ones; a word the
    # vocabulary does not know is kept apart (`state_text`), not counted
    absent = sum(v is None or v == "" or v == "not-a-state-we-know" for v in served)
    unread = sum(v is None for v in read) - absent
    assert counts == ({f"probe.{field}": unread} if unread else {})


def test_year_zero_text_alone_does_not_escape_arrow_as_an_overflow() -> None:
    """Arrow's own parser raises OverflowError (not ArrowInvalid) for `0000-01-01`."""
    values, counts = _load("at", ["0000-01-01T00:00:00Z", "2026-09-21T14:13:20Z"])

    assert values == [None, T]
    assert counts == {"probe.at": 1}


def test_counts_add_up_across_pages_and_columns() -> None:
    ledger = RunLedger()
    tally = ledger.unreadable
    for _ in range(3):
        at = "2026-01-01T00:00:00Z"  # a cursor is never missing (`MissingKey`)
        PROBE.page(
            [{"id": "1", "updated_at": at, "n": "x", "flag": "maybe"},
             {"id": "2", "updated_at": at, "n": 5}],
            ledger,
        )  # fmt: skip

    assert tally.counts() == {"probe.flag": 3, "probe.n": 3}


@pytest.mark.parametrize(("field", "value"), [("updated_at", "soon"), ("updated_at", 2**70)])
def test_a_key_or_cursor_that_cannot_be_read_ends_the_run_naming_it(field: str, value: Any) -> None:
    ledger = RunLedger()
    with pytest.raises(UnreadableKey) as caught:
        PROBE.page([{"id": "1", field: value}], ledger)

    assert str(caught.value).startswith(f"probe.{field}: {value!r} cannot be read as timestamp")
    assert exit_code_for(caught.value) == 3  # the API served it: an API failure
    assert error_text(caught.value).startswith("UnreadableKey: probe.updated_at")
    with pytest.raises(UnreadableKey, match=r"probe\.updated_at: 'soon'"):
        PROBE.cursor_time({"updated_at": "soon"})


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("2026-09-21T14:13:20Z", T),
        ("2026-09-21", datetime(2026, 9, 21, tzinfo=UTC)),
        (1790000000, T),
        (1790000000000, T),  # milliseconds
        ("1790000000", T),
        (None, None),
        ("", None),
    ],
)
def test_parse_time_reads_iso_and_epoch_seconds_or_milliseconds(value: Any, read: Any) -> None:
    assert parse_time(value) == read


@pytest.mark.parametrize(
    "value", ["0000-00-00T00:00:00Z", "+275760-09-13T00:00:00Z", "next spring", 20260210, 0, True]
)
def test_parse_time_refuses_what_is_no_time_or_no_tool_can_show(value: Any) -> None:
    with pytest.raises(ValueError, match="is not a time"):
        parse_time(value)
