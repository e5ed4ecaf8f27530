"""The marts answer the usual questions as the API served the answers: a device's maker, model,
enrolment date, Esper's security state and the last user who sent it a command
(`marts.fleet_compliance`); who sent each command and operation, by name (`command_rollout`,
`operation_rollout`).

The warehouse is the shared first load of the simulated tenant; every expectation is computed in
Python from the records the API serves (`sim.truth` of a simulator built as the loaded one).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.simulator import Simulator

from tests.conftest import API_KEY, ENTERPRISE_ID, SEED, SMALL_FLEET, FirstLoad, copy_warehouse

TRUTH = ("devices", "users", "command_requests", "command_statuses", "operations")


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, shared_first_load: FirstLoad
) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    wh = tmp_path_factory.mktemp("device_and_sender") / "warehouse.duckdb"
    copy_warehouse(shared_first_load.warehouse, wh)
    build_models(wh)
    # the loaded world: a simulator depends only on its seed and `advance` calls
    sim = Simulator(devices=SMALL_FLEET, seed=SEED, api_key=API_KEY, enterprise_id=ENTERPRISE_ID)
    assert sim.now == shared_first_load.result.as_of
    return wh, {table: sim.truth(table) for table in TRUTH}


def _rows(wh: Path, sql: str) -> dict[str, tuple]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return {key: tuple(rest) for key, *rest in con.execute(sql).fetchall()}


def test_fleet_compliance_names_maker_model_and_enrolment_as_served(built) -> None:
    wh, truth = built
    want = {
        d["id"]: (
            d["hardware_info"]["manufacturer"],
            d["hardware_info"]["model"],
            _when(d["provisioned_on"]),
            _when(d["created_at"]),
        )
        for d in truth["devices"]
    }
    got = _rows(
        wh,
        "select device_id, hardware_manufacturer, hardware_model, enrolled_at, created_at "
        "from marts.fleet_compliance",
    )
    assert got == want
    assert len({w[1] for w in want.values()}) > 3  # several models: a column, not a constant


def test_esper_security_state_reaches_the_mart_as_served(built) -> None:
    wh, truth = built
    want = {d["id"]: d.get("security_state") for d in truth["devices"]}
    got = _rows(wh, "select device_id, esper_security_state from marts.fleet_compliance")
    assert {k: v for k, (v,) in got.items()} == want
    # a mix, as Esper rates devices: null where no verdict exists, and several ratings
    assert None in want.values() and len(set(want.values()) - {None}) >= 3


def test_last_user_is_who_sent_the_latest_command_that_reached_the_device(built) -> None:
    wh, truth = built
    names = {u["user_id"]: u["name"] for u in truth["users"]}
    requests = {r["id"]: r for r in truth["command_requests"]}
    latest: dict[str, dict] = {}
    for status in truth["command_statuses"]:
        request = requests[status["request"]]
        held = latest.get(status["device"])
        if held is None or (request["created_at"], request["id"]) > (
            held["created_at"],
            held["id"],
        ):
            latest[status["device"]] = request
    want = {}
    for device in truth["devices"]:
        request = latest.get(device["id"])
        sender = request["created_by"] if request else None
        want[device["id"]] = (
            sender,
            names.get(sender),
            _when(request["created_at"]) if request else None,
        )
    got = _rows(
        wh,
        "select device_id, last_user_id, last_user_name, last_user_at from marts.fleet_compliance",
    )
    assert got == want
    assert any(w[1] for w in want.values()) and any(w[0] is None for w in want.values())


@pytest.mark.parametrize(
    ("mart", "key", "table"),
    [
        ("command_rollout", "command_request_id", "command_requests"),
        ("operation_rollout", "operation_id", "operations"),
    ],
)
def test_the_command_marts_name_who_sent_each(built, mart: str, key: str, table: str) -> None:
    wh, truth = built
    names = {u["user_id"]: u["name"] for u in truth["users"]}
    want = {r["id"]: (r["created_by"], names.get(r["created_by"])) for r in truth[table]}
    got = _rows(wh, f"select {key}, created_by, created_by_name from marts.{mart}")
    assert got == want
    assert all(name for _, name in want.values())
