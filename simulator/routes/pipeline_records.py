"""Esper Pipelines records, shaped as the spec's schemas (docs/spec/esper-pipelines-v0-subset.json).

No live recording of these routes exists: field names, types and status enums are the spec's.
Where the spec types a field a string but the simulator has no value yet (a run not started or
not ended, a target run not dispatched), it answers ``null``, as the live commands routes do
for unset fields (live-observations.md section 5). Users are the legacy integer ids of the
access area (``created_by`` is an int32 in the spec): pipelines are an admin's work.
"""

from __future__ import annotations

import json

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.dynamics.pipeline_book import (
    PIPELINE_TIMEOUT,
    STAGE_TIMEOUT,
    PipelineBook,
    Stage,
    target_state,
)
from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.routes.access import LEGACY_ID_BASE
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import Record

ADMIN = LEGACY_ID_BASE  # Ada Admin, the access area's Enterprise Admin


def book(w: World) -> PipelineBook:
    """The tenant's pipelines (kept by the clock, `simulator/dynamics/pipelines.py`)."""
    return w.engine.book


def _audit(created: int, updated: int | None = None) -> Record:
    return {
        "created_by": ADMIN,
        "updated_by": ADMIN,
        "created_at": iso(created),
        "updated_at": iso(created if updated is None else updated),
    }


def _when(ts: int | None) -> str | None:
    return None if ts is None else iso(ts)


def pipeline(w: World, p: int) -> Record:
    """`Pipeline`."""
    x = book(w).pipelines[p]
    return {
        "id": x.id,
        "enterprise_id": w.fleet.enterprise_id,
        "name": x.name,
        "description": x.description,
        "is_active": True,
        "is_valid": True,
        "is_visible": True,
        "is_archived": False,
        "is_default": False,
        "timeout_seconds": PIPELINE_TIMEOUT,
        **_audit(x.created),
    }


def stage(w: World, s: int) -> Record:
    """`Stage`; a pipeline's stages are listed, and were created, in their order."""
    x = book(w).stages[s]
    return {
        "id": x.id,
        "enterprise_id": w.fleet.enterprise_id,
        "pipeline_id": book(w).pipelines[x.pipeline].id,
        "description": x.description,
        "name": x.name,
        "timeout_seconds": STAGE_TIMEOUT,
        **_audit(x.created),
    }


def list_ids(x: Stage) -> tuple[str, str, str]:
    """(operation list, operation, target list) ids of a stage: one of each per stage."""
    return (
        derived_id("operationlist", x.id),
        derived_id("operation", x.id),
        derived_id("targetlist", x.id),
    )


def target_id(w: World, pipeline_id: str, device: int) -> str:
    """The id of a device's `Target` in a pipeline (the same in every target list)."""
    return derived_id("target", pipeline_id, w.fleet.ids[device])


def _args(w: World, p: int, version: int = -1) -> str:
    """An operation's `args`, a string in the spec: JSON text of the command's arguments."""
    x = book(w).pipelines[p]
    if x.app < 0:  # the command's arguments, as the tenant's other requests of it carry them
        return json.dumps(next(args for name, args in C.COMMANDS if name == x.command))
    app = w.fleet.legacy_apps[x.app]
    args = {"package_name": app.package}
    if version >= 0:
        args["app_version"] = app.versions[version].id
    return json.dumps(args)


def operation_list(w: World, s: int) -> Record:
    """`OperationList`: the one list of a stage."""
    x = book(w).stages[s]
    return {
        "id": list_ids(x)[0],
        "pipeline_id": book(w).pipelines[x.pipeline].id,
        "stage_id": x.id,
        "name": f"{x.name} operations",
        "description": x.description,
        **_audit(x.created),
    }


def operation(w: World, s: int) -> Record:
    """`Operation`: the stage's command (an app's INSTALL names the package; each run its
    version, `stage_run_operation`)."""
    x = book(w).stages[s]
    ids = list_ids(x)
    return {
        "id": ids[1],
        "operation_list_id": ids[0],
        "pipeline_id": book(w).pipelines[x.pipeline].id,
        "operation_type": book(w).pipelines[x.pipeline].command,
        "args": _args(w, x.pipeline),
        **_audit(x.created),
    }


def target_list(w: World, s: int) -> Record:
    """`TargetList`: DEVICES, or GROUPS resolved to their devices when a run reaches it."""
    x = book(w).stages[s]
    return {
        "id": list_ids(x)[2],
        "pipeline_id": book(w).pipelines[x.pipeline].id,
        "name": f"{x.name} targets",
        "target_list_type": "GROUPS" if x.groups else "DEVICES",
        **_audit(x.created),
    }


def target(w: World, s: int, device: int) -> Record:
    """`Target`: one device of a DEVICES target list."""
    f, x = w.fleet, book(w).stages[s]
    pid = book(w).pipelines[x.pipeline].id
    return {
        "id": target_id(w, pid, device),
        "pipeline_id": pid,
        "device_id": f.ids[device],
        "device_name": f.name[device],
        "device_alias": f.alias[device] or None,
        "is_active": not f.removed[device],
        **_audit(x.created),
    }


def target_group(w: World, s: int, group: int) -> Record:
    """`TargetListDeviceGroup`: one group of a GROUPS target list."""
    x = book(w).stages[s]
    tl = list_ids(x)[2]
    return {
        "id": derived_id("targetlistgroup", tl, group),
        "device_group_id": w.fleet.groups[group].id,
        "target_list_id": tl,
        **_audit(x.created),
    }


def run(w: World, r: int) -> Record:
    """`PipelineRun`; ``status_meta`` says what a running or waiting run is at."""
    b = book(w)
    x = b.runs[r]
    return {
        "id": x.id,
        "enterprise_id": w.fleet.enterprise_id,
        "run_number": x.number,
        "pipeline_id": b.pipelines[x.pipeline].id,
        "pipeline_name": b.pipelines[x.pipeline].name,
        "status": x.status,
        "status_meta": dict(x.meta),
        **_audit(x.created, x.updated),
        "started_at": _when(x.started),
        "ended_at": _when(x.ended),
    }


def stage_run(w: World, s: int) -> Record:
    """`StageRun`."""
    b = book(w)
    x = b.stage_runs[s]
    st = b.stages[x.stage]
    return {
        "id": x.id,
        "enterprise_id": w.fleet.enterprise_id,
        "pipeline_id": b.pipelines[st.pipeline].id,
        "pipeline_run_id": b.runs[x.run].id,
        "stage_id": st.id,
        "stage_meta": {"name": st.name, "description": st.description, "created_by": ADMIN},
        "status": x.status,
        **_audit(x.created, x.updated),
        "started_at": iso(x.created),
        "ended_at": _when(x.ended),
    }


def stage_run_operation(w: World, s: int) -> Record:
    """`StageRunOperation`: the stage's operation as this run carries it out (its version)."""
    b = book(w)
    x = b.stage_runs[s]
    run_ = b.runs[x.run]
    return {
        "id": x.operation_id,
        "operation_type": b.pipelines[run_.pipeline].command,
        "args": _args(w, run_.pipeline, run_.version),
        **_audit(x.created),
    }


def target_run(w: World, t: int) -> Record:
    """`TargetRun`: its command request (``command_id``), that command's status on the device
    (``command_status``, as `/commands/v0/status/` says it) and reason (``command_meta``)."""
    f, b = w.fleet, book(w)
    x = b.target_runs[t]
    sr = b.stage_runs[x.stage_run]
    status, updated, ended, s = target_state(f, x)
    meta: Record = {}
    if s >= 0:
        st = f.statuses[s]
        meta = {
            "request_id": f.commands[st.request].id,
            "request_status": C.COMMAND_STATES[st.state],
            "request_status_reason": st.reason or None,
        }
    return {
        "id": x.id,
        "target_id": target_id(w, b.pipelines[b.stages[sr.stage].pipeline].id, x.device),
        "device_id": f.ids[x.device],
        "device_alias": f.alias[x.device] or None,
        "stage_run_id": sr.id,
        "stage_run_operation_id": sr.operation_id,
        "command_id": meta.get("request_id"),
        "command_status": meta.get("request_status"),
        "command_meta": meta,
        "status": status,
        **_audit(x.created, updated),
        "started_at": _when(x.started),
        "ended_at": _when(ended),
    }
