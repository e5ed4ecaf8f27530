"""marts.fleet_changes over a first load and nightlies: each night's rows are exactly what comparing
the marts saved before and after that night gives (devices), and what the simulator's clock
produced (credentials crossing a threshold, Pipeline runs ended); a night with Pipelines refused
says they were not compared, and why. The expectations are computed here, in Python, from the two
sides' marts and the simulator's truth: the build's incremental record only meets them in the
asserts.
"""

from __future__ import annotations

import csv
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.pipelines.build.models import build_models

from tests.pipeline.helpers import load

ROOT = Path(__file__).resolve().parents[2]
Change = tuple[str, str, str]  # change, subject_kind, subject_id


def _thresholds() -> dict[str, tuple[int, int]]:
    with open(ROOT / "sql" / "vocabulary" / "credential_kinds.csv") as f:
        lines = [line for line in f if not line.startswith("#")]
    return {
        r["kind"]: (int(r["warning_days"]), int(r["urgent_days"])) for r in csv.DictReader(lines)
    }


def _marts(wh: Path) -> dict[str, Any]:
    """What a user reads in the marts: each device's verdict, the stale ones, each run's flags."""
    with duckdb.connect(str(wh), read_only=True) as con:
        verdicts = dict(
            con.execute("select device_id, verdict from marts.fleet_compliance").fetchall()
        )
        stale = {r[0] for r in con.execute("select device_id from marts.stale_devices").fetchall()}
        runs = {
            r[0]: (r[1], r[2])
            for r in con.execute(
                "select pipeline_run_id, bool_or(coalesce(is_failing, false)), "
                "bool_or(coalesce(is_stalled, false)) from marts.pipeline_rollout group by 1"
            ).fetchall()
        }
    return {"verdicts": verdicts, "stale": stale, "runs": runs}


def _truth(sim: Any) -> dict[str, Any]:
    expiries = {
        f"apns_certificate:{c['id']}": c["meta"]["cert_expiry_on"]
        for c in sim.truth("apns_certificates")
    }
    expiries |= {
        f"provisioning_profile:{p['id']}": p["expiration_date"]
        for p in sim.truth("provisioning_profiles")
    }
    expiries |= {
        f"dep_token:{t['id']}": t["meta"]["token_expiry_on"] for t in sim.truth("dep_tokens")
    }
    ended = {r["id"] for r in sim.truth("pipeline_runs") if r.get("ended_at")}
    return {"now": sim.now, "expiries": expiries, "ended": ended}


def _days_left(expires: str, now: datetime) -> int:
    seconds = (datetime.fromisoformat(expires.replace("Z", "+00:00")) - now).total_seconds()
    return int(seconds / 86400)  # toward zero, as credential_expiry.days_left


def _expected(before: dict[str, Any], after: dict[str, Any], families: set[str]) -> set[Change]:
    """The changes between two nights' marts and truths, in the families compared."""
    found: set[Change] = set()
    if "devices" in families:
        was, now = before["verdicts"], after["verdicts"]
        for device in now.keys() - was.keys():
            found.add(("enrolled", "device", device))
        for device in was.keys() - now.keys():
            found.add(("removed", "device", device))
        for device in was.keys() & now.keys():
            if was[device] != "non_compliant" and now[device] == "non_compliant":
                found.add(("became_non_compliant", "device", device))
            if was[device] != "compliant" and now[device] == "compliant":
                found.add(("became_compliant", "device", device))
            stale_before, stale_now = device in before["stale"], device in after["stale"]
            if stale_now and not stale_before:
                found.add(("stopped_checking_in", "device", device))
            if stale_before and not stale_now:
                found.add(("checked_in_again", "device", device))
    if "credentials" in families:
        thresholds = _thresholds()
        for subject, expires in after["truth"]["expiries"].items():
            if subject not in before["truth"]["expiries"]:
                continue
            left_before = _days_left(before["truth"]["expiries"][subject], before["truth"]["now"])
            left_now = _days_left(expires, after["truth"]["now"])
            expired_before = (
                datetime.fromisoformat(expires.replace("Z", "+00:00")) <= before["truth"]["now"]
            )
            expired_now = (
                datetime.fromisoformat(expires.replace("Z", "+00:00")) <= after["truth"]["now"]
            )
            if expired_now and not expired_before:
                found.add(("credential_expired", "credential", subject))
            elif not expired_now and any(
                left_before > days >= left_now for days in thresholds[subject.split(":")[0]]
            ):
                found.add(("credential_expiring", "credential", subject))
    if "pipelines" in families:
        for run_id in after["truth"]["ended"] - before["truth"]["ended"]:
            found.add(("pipeline_run_ended", "pipeline_run", run_id))
        for run_id, (failing, stalled) in after["runs"].items():
            was_failing, was_stalled = before["runs"].get(run_id, (False, False))
            if failing and not was_failing:
                found.add(("pipeline_run_failing", "pipeline_run", run_id))
            if stalled and not was_stalled:
                found.add(("pipeline_run_stalled", "pipeline_run", run_id))
    return found


def _found(wh: Path, as_of: datetime, kinds: set[str]) -> set[Change]:
    with duckdb.connect(str(wh), read_only=True) as con:
        rows = con.execute(
            "select change, subject_kind, subject_id from marts.fleet_changes "
            "where as_of = ? and family in (select unnest(?)) and change <> 'not_compared'",
            [as_of, sorted(kinds)],
        ).fetchall()
    assert len(rows) == len(set(rows)), "a change is listed once"
    return set(rows)


def _night(sim: Any, wh: Path, hours: float) -> tuple[datetime, dict[str, Any]]:
    sim.advance(hours)
    result = load(sim, wh, build_models=True)
    assert result.exit_code in (0, 6), result.error
    assert result.as_of is not None
    return result.as_of, {**_marts(wh), "truth": _truth(sim)}


def test_each_night_lists_what_the_marts_and_the_clock_changed(sim, wh, modelled_first_load):
    modelled_first_load(wh)
    state = {**_marts(wh), "truth": _truth(sim)}
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.execute("select count(*) from marts.fleet_changes").fetchone() == (0,), (
            "a first load has nothing to compare with"
        )
    every = {"devices", "credentials", "pipelines"}
    seen: set[str] = set()
    as_ofs: list[datetime] = []
    # a day, then twelve days (the Apple push certificate, 20 days from expiry at the first load,
    # crosses 7 days left), then a day with the Pipelines refused
    for hours, refused in ((24, False), (24 * 12, False), (24, True)):
        if refused:
            sim.set_faults([{"kind": "status", "status": 403, "route": "/pipelines/*"}])
        as_of, after = _night(sim, wh, hours)
        as_ofs.append(as_of)
        families = every - {"pipelines"} if refused else every
        expected = _expected(state, after, families)
        found = _found(wh, as_of, every)
        assert found == expected, (
            f"night to {as_of}: missing {sorted(expected - found)[:5]}, "
            f"extra {sorted(found - expected)[:5]}"
        )
        seen |= {change for change, _, _ in found}
        with duckdb.connect(str(wh), read_only=True) as con:
            not_compared = con.execute(
                "select subject_name, reason, since from marts.fleet_changes "
                "where as_of = ? and change = 'not_compared'",
                [as_of],
            ).fetchall()
        if refused:
            sim.set_faults([])
            assert len(not_compared) == 1, not_compared
            label, reason, since = not_compared[0]
            assert label == "Pipelines"
            assert "held back" in reason and "refused (403)" in reason and "/pipelines/" in reason
            assert since == state["truth"]["now"], "compared last at the night before"
        else:
            assert not_compared == []
        state = after
    # the clock moved every kind of change the simulator makes over these nights
    assert {"credential_expiring", "pipeline_run_ended", "stopped_checking_in"} <= seen, seen

    # a rebuild at the same as-of finds the same rows, once
    with duckdb.connect(str(wh), read_only=True) as con:
        kept = con.execute("select * from marts.fleet_changes order by all").fetchall()
    build_models(wh)
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.execute("select * from marts.fleet_changes order by all").fetchall() == kept
        nights = con.execute("select count(distinct as_of) from marts.fleet_changes").fetchone()
    assert nights == (3,), "kept across nights"

    # docs/guide/what-changed.md's "this week" query lists the nights of the last seven days
    readme = (ROOT / "docs" / "guide" / "what-changed.md").read_text()
    match = re.search(r"-- What changed this week\?\n(select .*?);", readme, re.S)
    assert match, "the guide has no 'What changed this week?' query"
    with duckdb.connect(str(wh), read_only=True) as con:
        week = con.execute(match.group(1)).fetchall()
        (expected,) = con.execute(
            "select count(*) from marts.fleet_changes where as_of >= ?",
            [state["truth"]["now"] - timedelta(days=7)],
        ).fetchone()  # type: ignore[misc]
    assert len(week) == expected > 0
    assert {row[0] for row in week} == set(as_ofs[1:]), "not the first night, 13 days before"
