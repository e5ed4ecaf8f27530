"""The marts over a simulator-loaded warehouse agree with the simulator's ground truth.

One warehouse per module: a simulated fleet, a full load, nightly loads a day apart, the models
built once at the end. Every expected value here is computed independently, in Python, from the
records the API serves at the last load (`sim.truth`) and the seed CSVs in `sql/seeds/` (read at
test time, so an edited seed moves both sides). Nothing is taken from the warehouse to compute an
expectation: the two sides only meet in the assertions.
"""

from __future__ import annotations

import csv
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.run.runner import RunSettings, run

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "sql" / "seeds"

DEVICES = 300
NIGHTS = 2  # nightly loads after the full load
# Mid-afternoon UTC, so "now" is not a day boundary (and days are judged in UTC).
START = datetime(2026, 10, 1, 15, 20, tzinfo=UTC)
TRUTH_TABLES = (
    "devices",
    "heartbeats",
    "groups",
    "blueprints",
    "tenant_apps",
    "tenant_app_versions",
    "device_apps",
    "command_requests",
    "command_statuses",
    "operations",
    "operation_devices",
)
SHOWN = 5  # disagreements quoted in a failure message
# What the loads fetch: the raw tables the marts compared here are built from (with the companions
# and the tables they read ids from, `dispositions.select`). The others (Pipelines, events,
# credentials, roles, ...) feed no mart this file reads, so loading them would only cost time.
RESOURCES = (
    "devices",
    "heartbeats",
    "device_apps",
    "groups",
    "blueprints",
    "tenant_apps",
    "applications",
    "command_requests",
    "command_statuses",
    "operations",
    "operation_devices",
    "users",
)


# -- the warehouse ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loaded:
    path: Path
    now: datetime  # sim.now at the last load = the models' as_of
    truth: dict[str, list[dict[str, Any]]]

    def query(self, sql: str) -> list[dict[str, Any]]:
        con = duckdb.connect(str(self.path), read_only=True)
        try:
            cursor = con.execute(sql)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            con.close()


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    from esper_warehouse.simulator import Simulator

    path = tmp_path_factory.mktemp("marts_vs_truth") / "warehouse.duckdb"
    with Simulator(
        devices=DEVICES, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID, start=START
    ) as sim:
        options = {
            "base_url": sim.base_url,
            "api_key": API_KEY,
            "enterprise_id": ENTERPRISE_ID,
            # Removals are only detectable on a complete device scan (docs/contracts.md, section 3:
            # device_census); a nightly does one when the last is a day old, so the fleet in the
            # marts is exactly the API's fleet at the last load.
            "full_scan_interval_days": 1.0,
        }
        for night in range(NIGHTS + 1):
            if night:
                sim.advance(hours=24)
            if night == NIGHTS:
                # The last load must see a command still running, so that the rollout marts are
                # checked on one: move on by the hour until the API has one (a few a day).
                for _ in range(72):
                    states = {command_state(s["state"]) for s in sim.truth("command_statuses")}
                    if states - set(TERMINAL):
                        break
                    sim.advance(hours=1)
            result = run(
                RunSettings(
                    warehouse=path,
                    full=night == 0,
                    lock_timeout_s=30,
                    build_models=False,
                    resources=RESOURCES,
                    source_options=options,
                )
            )
            assert result.exit_code == 0, f"load {night}: {result.status}: {result.error}"
            assert result.as_of == sim.now
        now = sim.now
        truth = {table: sim.truth(table) for table in TRUTH_TABLES}
    build_models(path, seeds=SEEDS)  # the shipped targets, as `make demo` uses them
    return Loaded(path, now, truth)


# The relations the tests below read; every raw table they are built from must be loaded.
COMPARED = (
    "marts.fleet_compliance",
    "marts.fleet_compliance_daily",
    "marts.stale_devices",
    "marts.command_rollout",
    "marts.operation_rollout",
    "marts.app_rollout",
    "marts.app_rollout_current",
    "intermediate.int_as_of",
)


def test_the_loads_fetch_every_raw_table_the_compared_marts_read() -> None:
    """`RESOURCES` is enough: a mart that starts reading another raw table fails here first,
    not later as a disagreement with the truth on a table the loads left empty."""
    from esper_warehouse.pipelines.build.model_files import SQL_DIR, _without_comments, load_models
    from esper_warehouse.pipelines.run.dispositions import COMPANIONS, NEEDS

    reads = {
        m.relation: set(re.findall(r"\b((?:esper|staging|intermediate|marts)\.\w+)",
                                   _without_comments(m.sql)))
        for layer in ("staging", "intermediate", "marts")
        for m in load_models(SQL_DIR, layer)
    }  # fmt: skip
    seen, todo = set(COMPARED), list(COMPARED)
    while todo:
        for name in reads[todo.pop()] - seen:
            seen.add(name)
            if name in reads:  # a model: what it reads too
                todo.append(name)
    raw = {name.removeprefix("esper.") for name in seen if name.startswith("esper.")}
    loaded = {*RESOURCES, *(n for r in RESOURCES for n in NEEDS.get(r, ()))}
    loaded |= {c for name in loaded for c in COMPANIONS.get(name, ())}
    assert "devices" in raw and "command_statuses" in raw  # the walk found the raw tables
    assert raw - {"_esper_runs"} - loaded == set(), "add these to RESOURCES"


# -- independent rules --------------------------------------------------------------------------


def version(text: Any) -> tuple[int, ...] | None:
    """A version as numbers part by part, trailing zeros dropped (13 = 13.0, 14.10 > 14.9).

    The first run of dot-separated digits counts ('Android 13' -> 13); no digit -> None.
    """
    if text is None:
        return None
    found = re.search(r"\d+(?:\.\d+)*", str(text))
    if found is None:
        return None
    parts = [int(p) for p in found.group(0).split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def at_least(value: Any, minimum: Any) -> bool | None:
    """value >= minimum as versions; None when the value has no version in it."""
    have, need = version(value), version(minimum)
    assert need is not None, f"seed minimum {minimum!r} is not a version"
    return None if have is None else have >= need


def ts(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)


def seed_rows(name: str) -> list[dict[str, str | None]]:
    """A seed CSV without its `#` comment lines; empty cells -> None."""
    lines = [
        line
        for line in (SEEDS / name).read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return [
        {k.strip(): (v.strip() or None) if v is not None else None for k, v in row.items()}
        for row in csv.DictReader(lines)
    ]


@dataclass(frozen=True)
class Seeds:
    targets: dict[str, dict[str, str | None]]  # platform -> min_os_version, ...
    required: dict[str, dict[str, str]]  # platform -> package -> min_version
    buckets: list[tuple[str, float | None, bool]]  # (bucket, max_hours, counts_as_seen), in order

    @classmethod
    def read(cls) -> Seeds:
        targets = {r["platform"].upper(): r for r in seed_rows("compliance_platform_targets.csv")}
        required: dict[str, dict[str, str]] = defaultdict(dict)
        for r in seed_rows("compliance_required_apps.csv"):
            required[r["platform"].upper()][r["package_name"]] = r["min_version"]
        buckets = [
            (
                r["bucket"].lower(),
                None if r["max_hours"] is None else float(r["max_hours"]),
                (r["counts_as_seen"] or "").lower() == "true",
            )
            for r in seed_rows("last_seen_buckets.csv")
        ]
        return cls(targets, dict(required), buckets)

    def bucket(self, hours: float | None) -> tuple[str, bool]:
        """(last-seen bucket, counts as seen): the first bucket whose max_hours >= hours."""
        if hours is None:
            return "never_seen", False
        for name, max_hours, seen in self.buckets:
            if max_hours is None or hours <= max_hours:
                return name, seen
        raise AssertionError(f"no bucket for {hours} hours in last_seen_buckets.csv")


@dataclass(frozen=True)
class Expected:
    """One device as the truth and the seeds judge it. Checks: True/False, None = not evaluated."""

    device_id: str
    platform: str
    os_version: str | None
    group_id: str | None
    group_path: str | None
    last_seen_at: datetime | None
    last_seen_bucket: str
    is_seen_recently: bool
    is_os_current: bool | None
    is_security_patch_current: bool | None
    is_blueprint_in_sync: bool | None
    has_required_apps: bool | None
    is_agent_current: bool | None
    unknown: tuple[str, ...]  # checks that apply but whose value was not reported
    verdict: str


def installed_apps(truth: dict[str, list[dict]]) -> dict[str, dict[str, str | None]]:
    """device id -> package -> installed version (version_name, else version_code), from the
    current app records; v2 (Apple/Windows) records carry only ids, resolved in the tenant app
    catalogue."""
    packages = {a["id"]: a["package_name"] for a in truth["tenant_apps"]}
    versions = {v["id"]: v for v in truth["tenant_app_versions"]}
    out: dict[str, dict[str, str | None]] = defaultdict(dict)
    for rec in truth["device_apps"]:
        if rec["route"] == "legacy":
            package, name, code = rec["package_name"], rec.get("version_name"), rec["version_code"]
        elif rec.get("app_id") is None:  # an App Store (VPP) or Esper app: named by bundle (§9)
            package, name, code = rec["bundle_id"], rec["apple_app_version"], None
        else:
            ver = versions[rec["app_version_id"]]
            package, name, code = packages[rec["app_id"]], ver["version_name"], ver["version_code"]
        out[rec["device_id"]][package] = name or code
    return dict(out)


def last_seen(truth: dict[str, list[dict]]) -> dict[str, datetime]:
    """device id -> latest of its heartbeat and its own last_seen (Apple/Windows/Linux)."""
    out: dict[str, datetime] = {}
    for hb in truth["heartbeats"]:
        out[hb["device_id"]] = ts(hb["timestamp"])
    for dev in truth["devices"]:
        own = ts(dev.get("last_seen"))
        if own is not None and (dev["id"] not in out or own > out[dev["id"]]):
            out[dev["id"]] = own
    return out


# Each check below: None when its target does not apply (empty seed cell, no required apps, no
# blueprint at all); else True/False, or None with the check appended to `unknown` when the
# device did not report the value.


def os_check(dev: dict, target: dict, unknown: list[str]) -> bool | None:
    min_os = target.get("min_os_version")
    os_current = None if min_os is None else at_least(dev.get("os_version"), min_os)
    if min_os is not None and os_current is None:
        unknown.append("os")
    return os_current


def patch_check(software: dict, target: dict, today: date, unknown: list[str]) -> bool | None:
    patch_level = software.get("security_patch_level")  # the detail route (live route 12)
    max_age = target.get("max_security_patch_age_days")
    patch_current = None
    if max_age is not None and patch_level is None:
        unknown.append("patch")
    elif max_age is not None:
        age = (today - date.fromisoformat(patch_level[:10])).days  # 'YYYY-MM-DD'
        patch_current = age <= int(max_age)
    return patch_current


def agent_check(software: dict, target: dict, unknown: list[str]) -> bool | None:
    min_agent = target.get("min_agent_version")
    agent = (software.get("esper_agent_info") or {}).get("version_name")
    agent_current = None if min_agent is None else at_least(agent, min_agent)
    if min_agent is not None and agent_current is None:
        unknown.append("agent")
    return agent_current


def blueprint_check(dev: dict, latest_blueprint_version: dict[str, str]) -> bool | None:
    """Blueprint drift: assigned != current blueprint, or the current version is not the
    assigned blueprint's latest version (the blueprint record's version_id: the API serves
    each blueprint with its latest version, all published), or the upgrade failed."""
    bp = dev.get("blueprint_info") or {}
    assigned, current = bp.get("assigned_blueprint_id"), bp.get("current_blueprint_id")
    blueprint_in_sync = None
    if assigned is not None or current is not None:
        latest = latest_blueprint_version.get(assigned)
        blueprint_in_sync = (
            assigned == current
            and (latest is None or bp.get("current_blueprint_version_id") == latest)
            and bp.get("blueprint_upgrade_status") != "UPGRADE_FAILED"
        )
    return blueprint_in_sync


def required_apps_check(
    required: dict[str, str] | None, mine: dict[str, str | None] | None, unknown: list[str]
) -> bool | None:
    """Every required package of the platform installed now at >= its minimum.

    Ambiguous case, decided like the warehouse can: a device with no app record at all has
    not reported an inventory (unknown), since an empty list and "never reported" look the
    same from the API. (Here that is typically Linux devices, which have no required apps.)
    """
    has_required = None
    if required is not None and mine is None:
        unknown.append("apps")
    elif required is not None:
        has_required = all(
            package in mine and bool(at_least(mine[package], minimum))
            for package, minimum in required.items()
        )
    return has_required


def expected_verdict(
    dev: dict, counts_as_seen: bool, checks: tuple[bool | None, ...], unknown: list[str]
) -> str:
    if dev.get("state") in OUT_OF_SERVICE_STATES:
        return "out_of_service"
    if not counts_as_seen:
        return "unverified"
    if False in checks:
        return "non_compliant"
    if unknown:
        return "unverified"
    return "compliant"


def expected_devices(loaded: Loaded) -> dict[str, Expected]:
    truth, now, seeds = loaded.truth, loaded.now, Seeds.read()
    today = now.astimezone(UTC).date()
    paths = {g["id"]: g["path"] for g in truth["groups"]}
    latest_blueprint_version = {b["id"]: b["version_id"] for b in truth["blueprints"]}
    apps = installed_apps(truth)
    seen = last_seen(truth)
    out = {}
    for dev in truth["devices"]:
        platform = dev["platform"].upper()
        target = seeds.targets.get(platform, {})
        software = dev.get("software_info") or {}
        unknown: list[str] = []  # filled in check order: os, patch, agent, apps
        os_current = os_check(dev, target, unknown)
        patch_current = patch_check(software, target, today, unknown)
        agent_current = agent_check(software, target, unknown)
        blueprint_in_sync = blueprint_check(dev, latest_blueprint_version)
        has_required = required_apps_check(
            seeds.required.get(platform), apps.get(dev["id"]), unknown
        )

        last = seen.get(dev["id"])
        hours = None if last is None else (now - last).total_seconds() / 3600
        bucket, counts_as_seen = seeds.bucket(hours)
        checks = (os_current, patch_current, blueprint_in_sync, has_required, agent_current)
        out[dev["id"]] = Expected(
            device_id=dev["id"],
            platform=platform,
            os_version=dev.get("os_version"),
            group_id=dev.get("group_id"),
            group_path=paths.get(dev.get("group_id")),
            last_seen_at=last,
            last_seen_bucket=bucket,
            is_seen_recently=counts_as_seen,
            is_os_current=os_current,
            is_security_patch_current=patch_current,
            is_blueprint_in_sync=blueprint_in_sync,
            has_required_apps=has_required,
            is_agent_current=agent_current,
            unknown=tuple(unknown),
            verdict=expected_verdict(dev, counts_as_seen, checks, unknown),
        )
    return out


def disagreements(
    expected: dict[Any, Any], got: dict[Any, Any], keys: Iterable[Any] | None = None
) -> list[str]:
    keys = sorted(expected if keys is None else keys, key=str)
    return [
        f"{k}: mart {got.get(k)!r} != truth {expected.get(k)!r}"
        for k in keys
        if got.get(k) != expected.get(k)
    ]


def assert_agree(what: str, expected: dict[Any, Any], got: dict[Any, Any]) -> None:
    assert set(got) == set(expected), (
        f"{what}: keys differ; only in mart {sorted(set(got) - set(expected), key=str)[:SHOWN]}, "
        f"only in truth {sorted(set(expected) - set(got), key=str)[:SHOWN]}"
    )
    bad = disagreements(expected, got)
    assert not bad, f"{what}: {len(bad)} of {len(expected)} disagree, e.g.\n" + "\n".join(
        bad[:SHOWN]
    )


# -- fleet_compliance ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def expected(loaded: Loaded) -> dict[str, Expected]:
    return expected_devices(loaded)


@pytest.fixture(scope="module")
def compliance(loaded: Loaded) -> dict[str, dict[str, Any]]:
    rows = loaded.query("select * from marts.fleet_compliance")
    ids = [r["device_id"] for r in rows]
    assert len(ids) == len(set(ids)), "fleet_compliance: a device on several rows"
    return {r["device_id"]: r for r in rows}


def test_fleet_is_the_api_fleet(loaded: Loaded, compliance: dict, expected: dict) -> None:
    assert len(expected) == len(loaded.truth["devices"]) >= DEVICES * 0.9
    assert set(compliance) == set(expected)
    assert {r["as_of"] for r in compliance.values()} == {loaded.now}


@pytest.mark.parametrize("column", ["platform", "os_version", "group_id", "group_path"])
def test_device_attributes(column: str, compliance: dict, expected: dict) -> None:
    assert_agree(
        f"fleet_compliance.{column}",
        {d: getattr(e, column) for d, e in expected.items()},
        {d: r[column] for d, r in compliance.items()},
    )


def test_last_seen(compliance: dict, expected: dict) -> None:
    assert_agree(
        "fleet_compliance.last_seen_at",
        {d: e.last_seen_at for d, e in expected.items()},
        {d: r["last_seen_at"] for d, r in compliance.items()},
    )
    assert_agree(
        "fleet_compliance.last_seen_bucket",
        {d: e.last_seen_bucket for d, e in expected.items()},
        {d: r["last_seen_bucket"] for d, r in compliance.items()},
    )
    assert_agree(
        "fleet_compliance.is_seen_recently",
        {d: e.is_seen_recently for d, e in expected.items()},
        {d: r["is_seen_recently"] for d, r in compliance.items()},
    )


CHECKS = [
    "is_os_current",
    "is_security_patch_current",
    "is_blueprint_in_sync",
    "has_required_apps",
    "is_agent_current",
]


@pytest.mark.parametrize("column", CHECKS)
def test_check(column: str, compliance: dict, expected: dict) -> None:
    assert_agree(
        f"fleet_compliance.{column}",
        {d: getattr(e, column) for d, e in expected.items()},
        {d: r[column] for d, r in compliance.items()},
    )


def test_verdicts(compliance: dict, expected: dict) -> None:
    assert_agree(
        "fleet_compliance.verdict",
        {d: e.verdict for d, e in expected.items()},
        {d: r["verdict"] for d, r in compliance.items()},
    )


def test_devices_per_verdict(compliance: dict, expected: dict) -> None:
    want = Counter(e.verdict for e in expected.values())
    got = Counter(r["verdict"] for r in compliance.values())
    assert got == want
    # The fleet is varied enough for the comparison to mean something.
    assert len(want) >= 2


def test_reasons_match_verdicts(compliance: dict, expected: dict) -> None:
    """A compliant device has no reason; every other device at least one."""
    bad = [
        d
        for d, r in compliance.items()
        if (expected[d].verdict == "compliant") != (list(r["reasons"]) == [])
    ]
    assert not bad, f"reasons disagree with the truth's verdict, e.g. {bad[:SHOWN]}"


def test_patch_reasons_quote_the_patch_level_of_the_legacy_list(
    loaded: Loaded, compliance: dict, expected: dict
) -> None:
    """/v2/devices/ list items carry no patch level (live route 15): every Android patch check
    and reason rests on the level the legacy device list served, which the truth's detail record
    holds too. Without the legacy join every check would be unknown."""
    patch = {
        d["id"]: (d.get("software_info") or {}).get("security_patch_level")
        for d in loaded.truth["devices"]
    }
    old = [d for d, e in expected.items() if e.is_security_patch_current is False]
    assert old, "the fleet must hold devices with an old patch for this test to mean something"
    assert any(e.is_security_patch_current for e in expected.values())
    for device_id in old:
        reasons = [r for r in compliance[device_id]["reasons"] if r.startswith("security patch")]
        assert len(reasons) == 1 and reasons[0].startswith(
            f"security patch {patch[device_id][:10]} is "
        ), (device_id, compliance[device_id]["reasons"])


def test_verdicts_per_group_and_platform(loaded: Loaded, expected: dict) -> None:
    """The as_of day of fleet_compliance_daily counts the truth's verdicts per group and platform."""
    want: Counter = Counter()
    for e in expected.values():
        want[(e.group_id, e.platform, e.verdict)] += 1
    rows = loaded.query(
        "select group_id, platform, compliant_devices, non_compliant_devices, unverified_devices, "
        "out_of_service_devices "
        "from marts.fleet_compliance_daily "
        "where day = (select as_of_date from intermediate.int_as_of)"
    )
    got: Counter = Counter()
    for r in rows:
        for verdict in ("compliant", "non_compliant", "unverified", "out_of_service"):
            if r[f"{verdict}_devices"]:
                got[(r["group_id"], r["platform"], verdict)] += r[f"{verdict}_devices"]
    assert_agree("fleet_compliance_daily (as_of day)", dict(want), dict(got))


# -- stale_devices ------------------------------------------------------------------------------


def test_stale_devices(loaded: Loaded, expected: dict) -> None:
    # Bucket names are fixed (sql/seeds/last_seen_buckets.csv); stale_devices leaves out the two
    # most recent ones, online and active, and keeps every other bucket, never_seen included.
    want = {
        d: e.last_seen_bucket
        for d, e in expected.items()
        if e.last_seen_bucket not in ("online", "active")
    }
    rows = loaded.query("select device_id, last_seen_bucket from marts.stale_devices")
    assert len(rows) == len({r["device_id"] for r in rows})
    assert_agree("stale_devices", want, {r["device_id"]: r["last_seen_bucket"] for r in rows})
    assert want, "the fleet should have stale devices"


# -- command_rollout and operation_rollout ------------------------------------------------------


STATES = (
    "queued",
    "initiated",
    "acknowledged",
    "in_progress",
    "scheduled",
    "success",
    "failure",
    "timeout",
    "cancelled",
)
TERMINAL = ("success", "failure", "timeout", "cancelled")
# The spec's DeviceStateEnum and Esper's own tools (live-observations section 22) read
# independently of sql/vocabulary: disabled, provisioning (30-50), factory reset / wipe in
# progress, onboarding (80-100: in progress, failed, onboarded), applying a blueprint (110-190).
OUT_OF_SERVICE_STATES = {20, 30, 40, 50, 70, *range(80, 191, 10)}


def latest_per_device(
    records: list[dict], parent: str, device: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """parent id -> device id -> its latest record (updated_at, then id)."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in records:
        held = out[rec[parent]].get(rec[device])
        if held is None or (ts(rec["updated_at"]), rec["id"]) > (
            ts(held["updated_at"]),
            held["id"],
        ):
            out[rec[parent]][rec[device]] = rec
    return out


def tally(states: Iterable[str]) -> dict[str, int]:
    counts = Counter(states)
    out = {f"{s}_devices": counts.get(s, 0) for s in STATES}
    out["target_devices"] = sum(counts.values())
    out["terminal_devices"] = sum(counts.get(s, 0) for s in TERMINAL)
    return out


def command_state(api: str) -> str:
    # 'Command In Progress' -> in_progress, 'Command TimeOut' -> timeout
    return api.removeprefix("Command ").strip().lower().replace(" ", "_")


OPERATION_DEVICE_STATES = {
    "CREATED": "queued",
    "INITIATED": "initiated",
    "SUCCEDED": "success",  # the API's spelling
    "FAILED": "failure",
}


def test_command_rollout(loaded: Loaded) -> None:
    latest = latest_per_device(loaded.truth["command_statuses"], "request", "device")
    want = {
        req["id"]: tally(command_state(s["state"]) for s in latest.get(req["id"], {}).values())
        for req in loaded.truth["command_requests"]
    }
    columns = [*next(iter(want.values()))]
    rows = loaded.query(
        f"select command_request_id, {', '.join(columns)} from marts.command_rollout"
    )
    got = {r.pop("command_request_id"): r for r in rows}
    assert_agree("command_rollout", want, got)
    assert any(w["target_devices"] > w["terminal_devices"] for w in want.values())
    assert any(w["failure_devices"] + w["timeout_devices"] for w in want.values())


def test_operation_rollout(loaded: Loaded) -> None:
    latest = latest_per_device(loaded.truth["operation_devices"], "operation_id", "device_id")
    want = {
        op["id"]: tally(
            OPERATION_DEVICE_STATES[p["state"]] for p in latest.get(op["id"], {}).values()
        )
        for op in loaded.truth["operations"]
    }
    # operation_rollout folds acknowledged into in_progress (the API has neither for operations)
    for counts in want.values():
        counts["in_progress_devices"] += counts.pop("acknowledged_devices")
    columns = [*next(iter(want.values()))]
    rows = loaded.query(f"select operation_id, {', '.join(columns)} from marts.operation_rollout")
    got = {r.pop("operation_id"): r for r in rows}
    assert_agree("operation_rollout", want, got)
    assert any(w["success_devices"] for w in want.values())


# -- app rollout --------------------------------------------------------------------------------


def expected_installs(loaded: Loaded) -> dict[tuple[str, str, str | None], int]:
    """(platform, package, version) -> current devices with it installed."""
    platform = {d["id"]: d["platform"].upper() for d in loaded.truth["devices"]}
    out: Counter = Counter()
    for device_id, packages in installed_apps(loaded.truth).items():
        for package, installed in packages.items():
            out[(platform[device_id], package, installed)] += 1
    return dict(out)


def test_app_rollout_current(loaded: Loaded) -> None:
    want = expected_installs(loaded)
    rows = loaded.query(
        "select platform, package_name, devices_with_app, devices_on_latest, latest_version, "
        "versions from marts.app_rollout_current"
    )
    got = {
        (r["platform"], r["package_name"], v["version_name"]): v["devices"]
        for r in rows
        for v in r["versions"]
    }
    assert_agree("app_rollout_current.versions", want, got)

    per_app: dict[tuple[str, str], dict[str | None, int]] = defaultdict(dict)
    for (plat, package, installed), n in want.items():
        per_app[(plat, package)][installed] = n
    want_apps = {}
    for app, versions in per_app.items():
        top = max(version(v) or () for v in versions)
        want_apps[app] = {
            "devices_with_app": sum(versions.values()),
            "devices_on_latest": sum(n for v, n in versions.items() if (version(v) or ()) == top),
        }
    got_apps = {
        (r["platform"], r["package_name"]): {
            "devices_with_app": r["devices_with_app"],
            "devices_on_latest": r["devices_on_latest"],
        }
        for r in rows
    }
    assert_agree("app_rollout_current per app", want_apps, got_apps)


def test_app_rollout_last_day(loaded: Loaded) -> None:
    """app_rollout's as_of day counts the installs valid now: the truth's current installs."""
    want = expected_installs(loaded)
    rows = loaded.query(
        "select platform, package_name, version_name, devices_on_version from marts.app_rollout "
        "where day = (select as_of_date from intermediate.int_as_of) and devices_on_version > 0"
    )
    got = {
        (r["platform"], r["package_name"], r["version_name"]): r["devices_on_version"] for r in rows
    }
    assert_agree("app_rollout (as_of day)", want, got)
