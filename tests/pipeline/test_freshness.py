"""Every number knows its age: a nightly that cannot read a table family keeps that family's
numbers at the time they were loaded, and says how old they are; a family never loaded is
unknown, never 0 (docs/guide/warehouse.md, "How old is a number"). Table by table: test_freshness_tables.py."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import summary
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.sources.esper.tables import FAMILY
from esper_warehouse.sources.esper.tables.access import ROLES
from esper_warehouse.sources.esper.tables.catalogues import BLUEPRINTS
from esper_warehouse.sources.esper.tables.credentials import APNS_CERTIFICATES
from esper_warehouse.sources.esper.tables.devices import DEVICE_APPS

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


VERDICT_HEADLINES = (
    "compliance_rate",
    "non_compliant_devices",
    "unverified_devices",
    "top_reasons",
)


def test_a_verdict_is_as_old_as_the_catalogues_it_reads(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    """The blueprint check reads the catalogues: with `/v2/blueprints/` refused, every verdict
    and every number drawn from verdicts says how old the catalogues are (the devices moved on
    with the run), and `status` warns once they are held back longer than the warning age."""
    good = modelled_first_load(wh)
    route = f"GET {BLUEPRINTS.path}"
    result = refused_night(sim, wh, (glob(BLUEPRINTS) + "*",), hours=24)
    assert result.exit_code == Exit.PARTIAL, result.error

    catalogues = f"Catalogues: as of {good.as_of:%Y-%m-%d %H:%M} UTC ("
    for like in VERDICT_HEADLINES:
        rows = headlines(wh, like)
        assert rows, like
        for row in rows:
            assert row[5] == good.as_of, (like, row)  # as old as its oldest family
            assert row[6] and catalogues in row[6] and f"{route} refused (403)" in row[6], row
    with duckdb.connect(str(wh), read_only=True) as con:
        notes = con.execute(
            "select distinct data_as_of, age_note from marts.fleet_compliance"
        ).fetchall()
    assert len(notes) == 1 and notes[0][0] == good.as_of and catalogues in notes[0][1], notes

    again = refused_night(sim, wh, (glob(BLUEPRINTS) + "*",), hours=48)
    assert again.exit_code == Exit.PARTIAL, again.error
    capsys.readouterr()
    assert status(wh) == Exit.HELD_BACK  # 72 h behind: more than the warning age


def test_a_partly_refused_table_is_as_old_as_its_refused_part(sim, wh: Path, capsys) -> None:
    """Android app lists refused every night while Apple and Windows ones load: the installed
    apps (and the devices family, and every verdict) are as old as the Android lists, never
    "current" because another platform's lists loaded; held back past the warning age, `status`
    warns; once the lists answer, everything is current again."""
    android = [{"kind": "status", "status": 403, "route": glob(DEVICE_APPS) + "*"}]
    route = f"GET {DEVICE_APPS.path}".replace("{eid}", "{id}")
    sim.set_faults(android)
    first = load(sim, wh, build_models=True)
    assert first.exit_code == Exit.PARTIAL, first.error

    def devices_note() -> str | None:
        with duckdb.connect(str(wh), read_only=True) as con:
            (note,) = con.execute(
                "select age_note from intermediate.int_family_freshness where family = 'devices'"
            ).fetchone()
        return note

    sim.advance(24)
    night = load(sim, wh, build_models=True)
    assert night.exit_code == Exit.PARTIAL, night.error
    note = devices_note()
    assert note and f"as of {first.as_of:%Y-%m-%d %H:%M} UTC (" in note, note
    assert f"{route} refused (403)" in note, note
    for row in headlines(wh, "compliance_rate"):
        assert row[5] == first.as_of and f"Devices: {note}" in row[6], row

    sim.advance(48)
    assert load(sim, wh, build_models=True).exit_code == Exit.PARTIAL
    capsys.readouterr()
    assert status(wh) == Exit.HELD_BACK

    sim.clear_faults()
    sim.advance(24)
    mended = load(sim, wh, build_models=True)
    assert mended.exit_code == Exit.OK, mended.error
    assert devices_note() is None
    assert status(wh) == Exit.OK


def test_a_date_the_data_and_the_machine_contradict_is_not_the_run_s_now(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    """One night's `Date` runs 72 h ahead of the data (the simulator's `clock_skew`): the run is
    as of its newest data and says why, devices are judged there (not all "not seen"), and the
    refusals of the nights after it are not hidden behind that night."""
    modelled_first_load(wh)
    sim.advance(24)
    sim.set_faults([{"kind": "clock_skew", "hours": 72}])
    skewed = load(sim, wh, build_models=True)
    assert skewed.exit_code == Exit.OK, skewed.error
    assert skewed.as_of is not None and abs(skewed.as_of - sim.now) <= timedelta(hours=2)
    assert "runs 72 h ahead of its newest data" in summary(skewed)
    (not_seen,) = [row[2] for row in headlines(wh, "not_seen_devices") if row[1] is None]
    (fleet,) = [row[2] for row in headlines(wh, "devices") if row[1] is None]
    assert not_seen < fleet / 4, (not_seen, fleet)

    sim.clear_faults()
    night = refused_night(sim, wh, ("/pipelines/v0/*",), hours=24)
    assert night.exit_code == Exit.PARTIAL, night.error
    with duckdb.connect(str(wh), read_only=True) as con:
        (behind, note) = con.execute(
            "select is_behind, age_note from intermediate.int_family_freshness "
            "where family = 'pipelines'"
        ).fetchone()
    assert behind and "GET /pipelines/v0/runs/ refused (403)" in note, note
