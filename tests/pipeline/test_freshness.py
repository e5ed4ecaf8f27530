"""Every number knows its age: a nightly that cannot read a table family keeps that family's
numbers at the time they were loaded, and says how old they are; a family never loaded is
unknown, never 0 (README "How old is a number"). Table by table: test_freshness_tables.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.status import status
from esper_warehouse.sources.esper.tables import FAMILY
from esper_warehouse.sources.esper.tables.access import ROLES
from esper_warehouse.sources.esper.tables.credentials import APNS_CERTIFICATES

from tests.routes import glob

from .helpers import load

# family -> (the routes a key without its scope is refused, the headlines drawn from it, the
# route the age note must name)
FAMILIES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "pipelines": (("/pipelines/v0/*",), "pipeline_runs_%", "GET /pipelines/v0/runs/"),
    "commands": (("/commands/v0/status/*",), "worst_command_rollouts", "GET /commands/v0/status/"),
    "credentials": (
        (glob(APNS_CERTIFICATES) + "*",),
        "credentials_needing_action",
        f"GET {APNS_CERTIFICATES.path}",
    ),
    "access": ((glob(ROLES) + "*",), "users_%", f"GET {ROLES.path}"),
    # every device's app list refused: nothing of the apps is newer, so the devices family (and
    # every compliance number, judged at its time) stays where it was
    "devices": (
        ("/enterprise/*/device/*/app/*", "/v2/devices/*/device-apps/*"),
        "compliance_rate",
        "GET /enterprise/{id}/device/{id}/app/",
    ),
}


def headlines(wh: Path, like: str) -> list[tuple[Any, ...]]:
    """The numbers of the headlines named `like` (value, denominator, by item), and their ages."""
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(
            "select headline, item, value, denominator, is_known, data_as_of, age_note "
            "from marts.headlines where headline like ? order by headline, item",
            [like],
        ).fetchall()


def numbers(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [row[:4] for row in rows]


def refused_night(
    sim: Any, wh: Path, routes: tuple[str, ...], hours: float = 48, family: str | None = None
) -> Any:
    """The tenant moves on `hours`; the next nightly is refused `routes` (403). With `family`, the
    nightly reads that family's tables alone (the others are then behind, "not read by the runs
    since", which no test of one family's figures and age reads)."""
    sim.advance(hours)
    sim.set_faults([{"kind": "status", "status": 403, "route": route} for route in routes])
    selection = [t for t, f in FAMILY.items() if f == family] if family else None
    return load(sim, wh, build_models=True, resources=selection)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_refused_after_a_good_night_keeps_its_numbers_and_says_how_old(
    sim, wh: Path, modelled_first_load, family: str, capsys
) -> None:
    routes, like, route = FAMILIES[family]
    good = modelled_first_load(wh)
    before = headlines(wh, like)
    assert before and all(row[4] and row[6] is None for row in before), before

    result = refused_night(sim, wh, routes)
    assert result.exit_code == Exit.PARTIAL, result.error
    after = headlines(wh, like)

    # the same numbers, judged at the time they were loaded, never at the newer "now"
    assert numbers(after) == numbers(before)
    as_of = f"{good.as_of:%Y-%m-%d %H:%M} UTC"
    for row in after:
        assert row[5] == good.as_of
        assert row[6] and f"as of {as_of} (2 days old: {route} refused (403) since " in row[6]

    with duckdb.connect(str(wh), read_only=True) as con:
        (note, behind) = con.execute(
            "select age_note, held_back_by from intermediate.int_family_freshness where family = ?",
            [family],
        ).fetchone()
        fresh = con.execute(
            "select count(*) from intermediate.int_family_freshness "
            "where family <> ? and family <> 'census' and is_behind",
            [family],
        ).fetchone()[0]
    assert fresh == 0  # the other families moved on with the run
    assert route in note

    capsys.readouterr()
    assert status(wh) == Exit.OK  # 48 h behind is not yet more than the warning age
    shown = capsys.readouterr().out
    freshness = shown.split("freshness")[1]
    assert f"{note}; tables: {behind}" in freshness
