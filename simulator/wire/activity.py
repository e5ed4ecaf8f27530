"""Activity records: command requests and their per-device statuses, operations, events."""

from __future__ import annotations

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import derived_id
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.simulator.wire.base import Record, WireBase


class ActivityRecords(WireBase):
    """Builders of command, operation and event-feed records."""

    # -- commands and operations ---------------------------------------------------------

    def command(self, r: int) -> Record:
        """CommandRequest record of request ``r``."""
        f = self.f
        req = f.commands[r]
        name, args = C.COMMANDS[req.command]
        sched_args: Record = {}
        if req.schedule == "WINDOW":
            sched_args = {
                "name": f"window-{req.id[:8]}",
                "start_datetime": iso(req.created),
                "end_datetime": iso(req.created + 7 * 86_400),
                "time_type": "console",
                "window_start_time": "22:00",
                "window_end_time": "23:59",
                "days": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
            }
        # Live route 27: `groups`, `schedule_args`, `reason` and `alias` are null when unset.
        return {
            "id": req.id,
            "command_type": "GROUP" if req.group >= 0 else "DEVICE",
            "devices": [] if req.group >= 0 else [f.ids[d] for d in req.devices],
            "groups": [f.groups[req.group].id] if req.group >= 0 else None,
            "device_type": "all",
            "command": name,
            "command_args": dict(args if req.args is None else req.args),
            "schedule": req.schedule,
            "schedule_args": sched_args or None,
            "reason": None,
            "alias": None,
            "created_by": req.created_by,
            "created_at": iso(req.created),
        }

    def command_status(self, s: int) -> Record:
        """CommandStatus record of status ``s``."""
        f = self.f
        st = f.statuses[s]
        return {
            "id": st.id,
            "request": f.commands[st.request].id,
            "device": f.ids[st.device],
            "state": C.COMMAND_STATES[st.state],
            "reason": st.reason or None,  # live route 29: null when there is none
            "created_at": iso(st.created),
            "updated_at": iso(st.updated),
        }

    def operation(self, o: int) -> Record:
        """OperationWithStats record of operation ``o``."""
        f = self.f
        op = f.operations[o]
        counts = [0, 0, 0, 0]
        for p in op.parts:
            counts[f.op_devices[p].state] += 1
        resolved = len(op.parts) if op.state >= C.OP_RESOLVED else 0
        dispatched = counts[1] + counts[2] + counts[3]
        return {
            "id": op.id,
            "operation": "CONVERGE",
            "state": C.OPERATION_STATES[op.state],
            "schedule_type": "IMMEDIATE",
            "schedule_args": {},
            "operation_device_query": {"device_ids": ",".join(f.ids[d] for d in op.devices)},
            "arguments": {"converge_with_provision": False},
            "alias": op.alias,
            "reason": "",
            "created_at": iso(op.created),
            "created_by": op.created_by,
            "updated_at": iso(op.updated),
            "updated_by": op.created_by,
            "operation_activity": [
                {"operation_state": name, "created_at": iso(ts)} for name, ts in op.activity
            ],
            "operation_stats": {
                "device_operation_statuses_count": {
                    "resolved_device_count": resolved,
                    "dispatched_device_count": dispatched,
                    "dispatch_failed_count": 0,
                    "failed_device_count": counts[3],
                    "success_device_count": counts[2],
                }
            },
        }

    def operation_device(self, p: int) -> Record:
        """DeviceOperationWithStats record of operation part ``p``."""
        f = self.f
        od = f.op_devices[p]
        return {
            "id": od.id,
            "operation_id": f.operations[od.operation].id,
            "device_id": f.ids[od.device],
            "state": C.OP_DEVICE_STATES[od.state],
            "reason": od.reason,
            "created_at": iso(od.created),
            "updated_at": iso(od.updated),
            "device_operation_activity": [
                {"device_operation_state": name, "created_at": iso(ts)} for name, ts in od.activity
            ],
        }

    # -- events --------------------------------------------------------------------------

    def event(self, i: int, ev: tuple[int, int, int, int, int]) -> Record:
        """EventFeed record of one event of device ``i``."""
        eid, ts, kind, a, b = ev
        return {
            "id": eid,
            "message_id": derived_id("msg", self.f.seed, eid),
            "device_status_id": derived_id("dst", self.f.seed, eid),
            "created_on": iso(ts),
            "message": self.event_message(i, kind, a, b),
            "device": self.device_url(i),
            "enterprise": self.enterprise_url(),
        }

    def event_message(self, i: int, kind: int, a: int, b: int) -> str:
        """Human-readable text of an event."""
        f = self.f
        if kind == C.EV_ENROLLED:
            return "Device enrolled"
        if kind in (C.EV_OS_UPDATED, C.EV_OS_FAILED):
            ver = C.OS_VERSIONS[f.os[i]][a][0]
            ok = kind == C.EV_OS_UPDATED
            return f"OS update to {ver} {'installed' if ok else 'failed'}"
        if kind in (C.EV_APP_INSTALLED, C.EV_APP_UPDATED, C.EV_APP_REMOVED, C.EV_APP_FAILED):
            cat = f.legacy_apps if f.platform(i) == C.ANDROID else f.tenant_apps
            app = cat[a]
            verb = {
                C.EV_APP_INSTALLED: "installed",
                C.EV_APP_UPDATED: "updated to",
                C.EV_APP_REMOVED: "removed",
                C.EV_APP_FAILED: "failed to update to",
            }[kind]
            ver = "" if kind == C.EV_APP_REMOVED else f" {app.versions[b].name}"
            return f"App {app.package} {verb}{ver}".replace("  ", " ")
        if kind == C.EV_COMMAND:
            return f"Command {C.COMMANDS[a][0]}: {C.COMMAND_STATES[b]}"
        if kind == C.EV_OPERATION:
            return f"Operation CONVERGE: device {C.OP_DEVICE_STATES[b]}"
        if kind == C.EV_BLUEPRINT:
            return f"Blueprint upgrade: {C.UPGRADE_STATUSES[b]}"
        if kind == C.EV_STATE:
            return f"Device state changed to {a}"
        return "Device settings changed"
