"""The warehouse guide's "Rollouts: five questions" (docs/guide/warehouse.md), run as pasted on the demo warehouse, answer what the
simulator's own records say (issue 43): how fast each app's newest version rolls out, who is left
on an older one, and which devices Esper rates at risk while the patch check passes (or secure
while it fails). Which stage and why failing are the Esper Pipelines questions, held by
test_readme_queries.py.

Every expected number is worked out in Python from the API's records as each night's load read
them (kept beside the demo warehouse: conftest.py `TRUTH_TABLES`) and the seed CSVs; nothing is
taken from the warehouse to compute an expectation.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.sql.test_marts_vs_truth import Seeds, patch_check, version

from .test_readme_queries import ROOT, _readme_query

AT_RISK = {"SECURE": False, "LOW_RISK": True, "MEDIUM_RISK": True, "HIGH_RISK": True}
CURRENT_DAYS = 30  # app_rollout_current_days() in sql/macros/macros.sql


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@dataclass(frozen=True)
class Truth:
    now: datetime  # the last load's API time: the marts' as_of
    devices: dict[str, dict[str, Any]]  # the API's devices at the last load
    platform: dict[str, str]  # every device any load read -> platform
    # (platform, package, version) -> device -> its first install of that version, every night
    installs: dict[tuple[str, str, str], dict[str, datetime]]
    current: dict[str, dict[str, str]]  # current device -> package -> version at the last load


def _resolved(rec: dict[str, Any], packages: dict, versions: dict) -> tuple[str, str, str]:
    """(package, version, updated time) of one installed-app record of the API."""
    if rec["route"] == "legacy":
        version_ = rec.get("version_name") or rec["version_code"]
        return rec["package_name"], version_, rec["updated_on"]
    if rec.get("app_id") is None:  # an App Store or Esper app, named by its bundle
        return rec["bundle_id"], rec["apple_app_version"], rec["updated_at"]
    ver = versions[rec["app_version_id"]]
    version_ = ver.get("version_name") or ver["version_code"]
    return packages[rec["app_id"]], version_, rec["updated_at"]


@pytest.fixture(scope="module")
def truth(demo_warehouse: Path) -> Truth:
    nights = sorted(
        (demo_warehouse.parent / "truth").glob("night-*.json"),
        key=lambda p: int(p.stem.split("-")[1]),
    )
    assert nights, "the demo warehouse keeps the simulator's records of each night"
    platform: dict[str, str] = {}
    installs: dict[tuple[str, str, str], dict[str, datetime]] = defaultdict(dict)
    current: dict[str, dict[str, str]] = {}
    for path in nights:
        night = json.loads(path.read_text())
        packages = {a["id"]: a["package_name"] for a in night["tenant_apps"]}
        versions = {v["id"]: v for v in night["tenant_app_versions"]}
        platform.update({d["id"]: d["platform"].upper() for d in night["devices"]})
        current = defaultdict(dict)
        for rec in night["device_apps"]:
            package, version_, updated = _resolved(rec, packages, versions)
            key = (platform[rec["device_id"]], package, version_)
            seen = installs[key].get(rec["device_id"])
            installs[key][rec["device_id"]] = min(filter(None, (seen, _ts(updated))))
            current[rec["device_id"]][package] = version_
    devices = {d["id"]: d for d in night["devices"]}
    current = {device: apps for device, apps in current.items() if device in devices}
    return Truth(_ts(night["as_of"]), devices, platform, dict(installs), current)


def _quantile(values: list[float], q: float) -> float:
    """Continuous quantile (linear interpolation), as DuckDB's quantile_cont."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _at_or_above(have: str, target: str) -> bool:
    have_key, target_key = version(have), version(target)
    return have == target or (
        have_key is not None and target_key is not None and have_key >= target_key
    )


def _holders(truth: Truth) -> dict[tuple[str, str], dict[str, str]]:
    """(platform, package) -> each current device with the app -> its version now."""
    with_app: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for device, apps in truth.current.items():
        for package, installed in apps.items():
            with_app[(truth.platform[device], package)][device] = installed
    return with_app


def _days_to(
    truth: Truth, key: tuple[str, str, str], holders: dict[str, str]
) -> dict[float, float | None]:
    """Days from a version's first appearance until 50 % (90 %) of the devices with the app had
    it or a higher one, each device at its earliest such install (a device already higher when
    the version appeared: at its appearance); None until reached."""
    plat, package, target = key
    first_seen = min(truth.installs[key].values())
    adopted = []
    for device in holders:
        times = [
            when
            for (p, pkg, v), devices in truth.installs.items()
            if p == plat and pkg == package and _at_or_above(v, target)
            for d, when in devices.items()
            if d == device
        ]
        adopted.append(max(min(times), first_seen) if times else None)
    adopted.sort(key=lambda t: (t is None, t))
    reached = {share: adopted[math.ceil(share * len(adopted)) - 1] for share in (0.5, 0.9)}
    return {
        share: None if when is None else (when - first_seen).total_seconds() / 86400
        for share, when in reached.items()
    }


def expected_latest(truth: Truth) -> dict[tuple[str, str], dict[str, Any]]:
    """Each app's latest version on each platform (the highest on a current device), with how
    far and how fast it got, from the records alone."""
    out = {}
    for (plat, package), holders in _holders(truth).items():
        latest = max(holders.values(), key=lambda v: version(v) or ())
        first_seen = min(truth.installs[(plat, package, latest)].values())
        days = _days_to(truth, (plat, package, latest), holders)
        minutes = [
            (when - first_seen).total_seconds() / 60
            for when in truth.installs[(plat, package, latest)].values()
        ]
        at_or_above = sum(_at_or_above(v, latest) for v in holders.values())
        out[(plat, package)] = {
            "version_name": latest,
            "first_seen_at": first_seen,
            "devices_at_or_above": at_or_above,
            "devices_with_app": len(holders),
            "days_to_50_pct": days[0.5],
            "days_to_90_pct": days[0.9],
            "p50_minutes_to_install": _quantile(minutes, 0.5),
            "p90_minutes_to_install": _quantile(minutes, 0.9),
            "devices_on_older": len(holders) - at_or_above,
            "laggards": {d for d, v in holders.items() if not _at_or_above(v, latest)},
        }
    return out


def _query(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _close(got: float | None, want: float | None, within: float) -> bool:
    return (got is None) == (want is None) and (got is None or abs(got - want) <= within)


def test_how_fast_is_each_apps_newest_version_rolling_out(demo_warehouse, truth) -> None:
    readme = _query(demo_warehouse, _readme_query("How fast is each app's newest version"))
    names = {  # the README shows the app's name: map it back through the mart's key
        (r["platform"], r["app_name"]): r["package_name"]
        for r in _query(demo_warehouse, "select * from marts.app_version_rollout")
    }
    want = expected_latest(truth)
    got = {(r["platform"], names[(r["platform"], r["app_name"])]): r for r in readme}
    assert set(got) == set(want)
    assert [r["first_seen_at"] for r in readme] == sorted(
        (r["first_seen_at"] for r in readme), reverse=True
    )
    for key, expected in want.items():
        row = got[key]
        for column in ("version_name", "first_seen_at", "devices_at_or_above",
                       "devices_with_app", "devices_on_older"):  # fmt: skip
            assert row[column] == expected[column], (key, column, row[column], expected[column])
        for column in ("days_to_50_pct", "days_to_90_pct"):  # one decimal in the mart
            assert _close(row[column], expected[column], 0.051), (key, column, row, expected)
        for column in ("p50_minutes_to_install", "p90_minutes_to_install"):
            assert _close(row[column], expected[column], 1e-6), (key, column, row, expected)
    # the demo has rollouts part done and done: not every answer is NULL or 100 %
    assert any(r["days_to_90_pct"] is None for r in readme)
    assert any(r["days_to_50_pct"] is not None for r in readme)
    assert any(r["devices_on_older"] for r in readme)


def test_every_version_s_adoption_counts_the_devices_already_higher(demo_warehouse, truth) -> None:
    """Days to 50 % and 90 % of every version in marts.app_version_rollout, not only the newest
    the README shows: a device that went to a higher version adopted the older ones too. The
    demo holds such versions (a device skipped them, or was higher when they appeared)."""
    with_app = _holders(truth)
    rows = _query(demo_warehouse, "select * from marts.app_version_rollout")
    through_higher = 0
    for row in rows:
        key = (row["platform"], row["package_name"], row["version_name"])
        days = _days_to(truth, key, with_app[key[:2]])
        for share, column in ((0.5, "days_to_50_pct"), (0.9, "days_to_90_pct")):
            assert _close(row[column], days[share], 0.051), (key, column, row[column], days)
        exact = {d for d in with_app[key[:2]] if d in truth.installs[key]}
        higher = {
            d for (p, pkg, v), devices in truth.installs.items()
            if (p, pkg) == key[:2] and v != key[2] and _at_or_above(v, key[2])
            for d in devices if d in with_app[key[:2]]
        }  # fmt: skip
        through_higher += bool(higher - exact)
    assert len(rows) > len(with_app) and through_higher, "the demo has older versions skipped"


def test_who_is_left_on_an_older_version(demo_warehouse, truth) -> None:
    readme = _query(demo_warehouse, _readme_query("Who is left on an older version?"))
    ids = {
        r["device_name"]: r["device_id"]
        for r in _query(
            demo_warehouse, "select device_id, device_name from marts.app_version_laggards"
        )
    }
    names = {
        (r["platform"], r["app_name"]): r["package_name"]
        for r in _query(demo_warehouse, "select * from marts.app_version_rollout")
    }
    got = defaultdict(set)
    for r in readme:
        got[(r["platform"], names[(r["platform"], r["app_name"])])].add(ids[r["device_name"]])
    want = {key: e["laggards"] for key, e in expected_latest(truth).items() if e["laggards"]}
    assert dict(got) == want
    assert len(readme) == sum(len(v) for v in want.values())
    for r in readme:  # each device at the version the records give it, below the latest
        package = names[(r["platform"], r["app_name"])]
        assert truth.current[ids[r["device_name"]]][package] == r["installed_version"]
        assert not _at_or_above(r["installed_version"], r["latest_version"])


def expected_security(truth: Truth) -> dict[str, str]:
    """device id -> disagreement, from the API's device records and the shipped patch target."""
    seeds, today = Seeds.read(), truth.now.date()
    out = {}
    for device_id, dev in truth.devices.items():
        state = dev.get("security_state")
        if not state:
            continue
        target = seeds.targets.get(dev["platform"].upper(), {})
        patch_current = patch_check(dev.get("software_info") or {}, target, today, [])
        if state not in AT_RISK:
            out[device_id] = "esper_state_unknown"
        elif AT_RISK[state] and patch_current is True:
            out[device_id] = "esper_only"
        elif not AT_RISK[state] and patch_current is False:
            out[device_id] = "ours_only"
    return out


def test_which_devices_esper_rates_at_risk_beside_ours(demo_warehouse, truth) -> None:
    readme = _query(demo_warehouse, _readme_query("Which devices does Esper rate at risk"))
    ids = {
        r["device_name"]: r["device_id"]
        for r in _query(demo_warehouse, "select device_id, device_name from marts.fleet_compliance")
    }
    got = {ids[r["device_name"]]: r["disagreement"] for r in readme}
    want = expected_security(truth)
    assert got == want
    assert set(want.values()) >= {"esper_only", "ours_only"}, "the demo shows both kinds"
    for r in readme:  # both reasons, in words
        state = truth.devices[ids[r["device_name"]]]["security_state"]
        assert r["esper_security_state"] == state and r["esper_reason"]
        assert r["our_reason"].count("security patch") == 1
        assert f"verdict {r['verdict']}" in r["our_reason"]
        if r["disagreement"] == "ours_only":
            assert "(maximum 90)" in r["our_reason"]
        else:
            assert "within the maximum 90" in r["our_reason"]


def test_the_headlines_count_as_the_records(demo_warehouse, truth) -> None:
    """security_disagreements (and its kinds) and slowest_app_rollout, worked out from the
    records: the one home of the numbers the surfaces print."""
    rows = _query(
        demo_warehouse,
        "select headline, item, label, value, denominator from marts.headlines "
        "where headline in ('security_disagreements', 'slowest_app_rollout')",
    )
    by = {(r["headline"], r["item"]): r for r in rows}
    security = expected_security(truth)
    assert by[("security_disagreements", None)]["value"] == len(security)
    for kind in set(security.values()):
        assert by[("security_disagreements", kind)]["value"] == list(security.values()).count(kind)

    since = truth.now - timedelta(days=CURRENT_DAYS)
    current = [
        (e["first_seen_at"], e["devices_at_or_above"] / e["devices_with_app"], plat, package, e)
        for (plat, package), e in expected_latest(truth).items()
        if e["days_to_90_pct"] is None and e["first_seen_at"] >= since
    ]
    assert current, "the demo has an app rollout in progress"
    *_, plat, _package, slowest = min(current, key=lambda c: c[:4])
    row = by[("slowest_app_rollout", None)]
    assert (row["value"], row["denominator"]) == (
        slowest["devices_at_or_above"],
        slowest["devices_with_app"],
    )
    days = (truth.now - slowest["first_seen_at"]).total_seconds() / 86400
    shown = re.search(r" (\S+) on (\w+), first installed ([\d.]+) days ago", row["label"])
    assert shown and shown.group(1) == slowest["version_name"] and shown.group(2) == plat
    assert abs(float(shown.group(3)) - days) <= 0.051


def test_the_guide_asks_the_five_questions() -> None:
    """Five questions, each answered by one query the guide holds (the Pipelines two above)."""
    readme = (ROOT / "docs" / "guide" / "warehouse.md").read_text()
    section = readme[readme.index("### Rollouts: five questions") :]
    section = section[: section.index("\n## ")]
    asked = re.findall(r"^\d\. \*\*(.+?)\*\*", section, re.M)
    assert len(asked) == 5
    for title in ("How fast is each app's newest version", "Who is left on an older version?",
                  "Which stage is each rollout in?", "Which devices failed stage 2",
                  "Which devices does Esper rate at risk"):  # fmt: skip
        assert _readme_query(title)
