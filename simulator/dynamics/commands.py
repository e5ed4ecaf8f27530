"""Commands and operations: issued to a few to a few hundred devices, their per-device
statuses then walk forward through legal states over hours to days (scheduled steps).
"""

from __future__ import annotations

import heapq
import random

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.dynamics.base import EngineBase
from esper_warehouse.simulator.fleet import (
    HOUR,
    CommandRequest,
    CommandStatus,
    Operation,
    OperationDevice,
    new_id,
)
from esper_warehouse.simulator.people import MISUSED_ACCOUNTS, sender


class CommandsAndOperations(EngineBase):
    """Issuing commands and operations and stepping their statuses."""

    # -- scheduled steps -----------------------------------------------------------------

    def _schedule(self, ts: int, kind: str, idx: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (ts, self.seq, kind, idx))

    def _fire_due(self, t1: int) -> None:
        while self.heap and self.heap[0][0] < t1:
            _ts, _seq, kind, idx = heapq.heappop(self.heap)
            if kind == "status":
                self._step_status(idx)
            elif kind == "pipeline":
                self._step_pipeline(idx, _ts)
            elif kind == "opdev":
                self._step_op_device(idx)
            else:
                self._step_operation(idx)

    # -- commands ------------------------------------------------------------------------

    def _target_size(self) -> int:
        """A few to a few hundred devices, at most 2 % of the fleet (5 on a tiny one)."""
        r = self.rng.random()
        if r < 0.5:
            n = self.rng.randint(1, 5)
        elif r < 0.85:
            n = self.rng.randint(10, 60)
        else:
            n = self.rng.randint(100, 300)
        return max(1, min(n, max(5, len(self.f.ids) // 50)))

    def _issue_command(self, ts: int) -> None:
        f, rng = self.f, self.rng
        group = -1
        if rng.random() < 0.2:
            group = rng.choice(f.leaf_groups)
            devices = sorted(i for i in self._members_of(group) if not f.removed[i])
        else:
            devices = sorted(set(self._sample_live(self._target_size())))
        if not devices:
            return
        schedule = "WINDOW" if rng.random() < 0.15 else "IMMEDIATE"
        request_id, command = new_id(rng), rng.randrange(len(C.COMMANDS))
        drawn = f.users.index(rng.choice(f.users))
        issuer = self._issuer(drawn, C.COMMANDS[command][0], group, devices)
        if issuer is None:  # the group's scope list lacks the command: sent device by device
            group = -1
            issuer = self._issuer(drawn, C.COMMANDS[command][0], group, devices)
        if issuer is None:
            return
        r = len(f.commands)
        req = CommandRequest(request_id, command, devices, group, schedule, ts, f.users[issuer])
        f.commands.append(req)
        f.command_index[req.id] = r
        for d in devices:
            s = len(f.statuses)
            first = C.CMD_SCHEDULED if schedule == "WINDOW" else C.CMD_QUEUED
            st = CommandStatus(
                new_id(rng), r, d, first, ts, ts, plan=self._status_plan(d, ts, first)
            )
            f.statuses.append(st)
            f.status_index[st.id] = s
            req.statuses.append(s)
            f.add_event(d, ts, C.EV_COMMAND, req.command, first)
            self._schedule(st.plan[0][0], "status", s)

    def _issuer(self, drawn: int, command: str, group: int, devices: list[int]) -> int | None:
        """Who sends a request: the person the seed drew when they may (`people.may_send`), else
        the next who may; in the `misused_accounts` scenario, whoever was drawn.

        The draw is made whatever follows, so the rest of the seed's history (devices, rollouts,
        statuses) is the same with and without the scenario.
        """
        if self.scenario == MISUSED_ACCOUNTS:
            return drawn
        return sender(self.f, drawn, command, group, devices)

    def _step_pipeline(self, idx: int, ts: int) -> None:
        """A scheduled step of a pipeline run (`dynamics/pipelines.py` overrides it)."""

    def issue_to_device(
        self, rng: random.Random, ts: int, device: int, name: str, **how: object
    ) -> int:
        """Issue a command to one device now, as a pipeline's target run does; returns its index.

        Its status walks the same legal path as any command's (:meth:`_status_plan`), drawn from
        ``rng`` (the caller's own, so the rest of the fleet's history does not move).

        Args:
            rng: the caller's random source.
            ts: when the command is issued.
            device: device index.
            name: a command of `catalog.COMMANDS`.
            **how: ``args`` (the command's arguments), ``install`` ((app, version) an INSTALL
                puts on the device on success), ``created_by`` (the index of a person of
                `people.PEOPLE`, who may send it), ``plan`` ((seconds after ``ts``, state)
                steps a scripted device follows instead of a drawn path).
        """
        f = self.f
        r = len(f.commands)
        command = next(k for k, (n, _a) in enumerate(C.COMMANDS) if n == name)
        by = f.users[int(how.get("created_by") or 0)]  # type: ignore[call-overload]
        req = CommandRequest(new_id(rng), command, [device], -1, "IMMEDIATE", ts, by)
        req.args = how.get("args")  # type: ignore[assignment]
        req.install = how.get("install")  # type: ignore[assignment]
        f.commands.append(req)
        f.command_index[req.id] = r
        s = len(f.statuses)
        scripted = how.get("plan")
        if scripted is None:
            plan = self._status_plan(device, ts, C.CMD_QUEUED, rng)
        else:
            plan = [(ts + after, state) for after, state in scripted]  # type: ignore[attr-defined]
        st = CommandStatus(new_id(rng), r, device, C.CMD_QUEUED, ts, ts, plan=plan)
        f.statuses.append(st)
        f.status_index[st.id] = s
        req.statuses.append(s)
        f.add_event(device, ts, C.EV_COMMAND, command, C.CMD_QUEUED)
        self._schedule(plan[0][0], "status", s)
        return r

    def _status_plan(
        self, d: int, ts: int, first: int, rng: random.Random | None = None
    ) -> list[tuple[int, int]]:
        """The future (time, state) path of a new status, legal step by legal step."""
        f, rng = self.f, rng or self.rng
        plan: list[tuple[int, int]] = []
        t = ts
        if first == C.CMD_SCHEDULED:
            t += rng.randint(2 * HOUR, 24 * HOUR)
            if rng.random() < 0.15:
                return [(t, C.CMD_CANCELLED)]
            plan.append((t, C.CMD_QUEUED))
        if f.dark[d] or f.last_seen[d] < 0:
            return [*plan, (t + 48 * HOUR, C.CMD_TIMEOUT)]
        r = rng.random()
        if r < 0.02:
            return [*plan, (t + rng.randint(HOUR, 12 * HOUR), C.CMD_CANCELLED)]
        t += rng.randint(30, 4 * HOUR)
        plan.append((t, C.CMD_INITIATED))
        t += rng.randint(5, 120)
        plan.append((t, C.CMD_ACKNOWLEDGED))
        if r < 0.05:
            return [*plan, (t + 24 * HOUR, C.CMD_TIMEOUT)]
        t += rng.randint(5, 300)
        plan.append((t, C.CMD_IN_PROGRESS))
        t += rng.randint(10, 2 * HOUR)
        plan.append((t, C.CMD_FAILURE if r < 0.12 else C.CMD_SUCCESS))
        return plan

    def _step_status(self, s: int) -> None:
        f = self.f
        st = f.statuses[s]
        ts, state = st.plan.pop(0)
        st.state = state
        st.updated = ts
        if state == C.CMD_FAILURE:
            st.reason = "Command failed on device"
        elif state == C.CMD_TIMEOUT:
            st.reason = "Device did not respond in time"
        elif state == C.CMD_CANCELLED:
            st.reason = "Cancelled"
        req = f.commands[st.request]
        if not f.removed[st.device]:
            f.add_event(st.device, ts, C.EV_COMMAND, req.command, state)
            if state == C.CMD_SUCCESS and req.install is not None:
                self._install(st.device, *req.install, ts)
        if st.plan:
            self._schedule(st.plan[0][0], "status", s)

    def _install(self, i: int, app: int, version: int, ts: int) -> None:
        """A successful INSTALL: device ``i``, which has legacy ``app``, has ``version`` of it
        from ``ts`` (an update; a device without the app is never a pipeline's target)."""
        f = self.f
        apps = f.apps[i]
        for k, (a, v, created, _u) in enumerate(apps):
            if a == app and v < version and f.platform(i) == C.ANDROID:
                # the device reports its new app list just after the command's success
                apps[k] = (a, version, created, ts + 1)
                f.touch(i, ts + 1, C.EV_APP_UPDATED, a, version)

    # -- operations ----------------------------------------------------------------------

    def _issue_operation(self, ts: int) -> None:
        f, rng = self.f, self.rng
        devices = sorted(set(self._sample_live(self._target_size())))
        if not devices:
            return
        o = len(f.operations)
        op_id, drawn = new_id(rng), f.users.index(rng.choice(f.users))
        issuer = self._issuer(drawn, "CONVERGE", -1, devices)
        if issuer is None:
            return
        op = Operation(op_id, f"converge-{o + 1}", C.OP_CREATED, ts, ts, f.users[issuer], devices)
        op.activity.append(("CREATED", ts))
        f.operations.append(op)
        f.operation_index[op.id] = o
        t = ts + rng.randint(5, 60)
        op.plan = [(t, C.OP_RESOLVING)]
        t += rng.randint(10, 120)
        op.plan.append((t, C.OP_RESOLVED))
        t += rng.randint(10, 60)
        op.plan.append((t, C.OP_DISPATCHING))
        dispatch = t
        last = t
        n_failed = 0
        for d in devices:
            p = len(f.op_devices)
            od = OperationDevice(new_id(rng), o, d, C.OPD_CREATED, dispatch, dispatch)
            od.activity.append(("CREATED", dispatch))
            ti = dispatch + rng.randint(1, 30)
            if f.dark[d] or f.last_seen[d] < 0:
                tf, final = dispatch + 24 * HOUR, C.OPD_FAILED
            else:
                tf = ti + rng.randint(60, 6 * HOUR)
                final = C.OPD_FAILED if rng.random() < 0.08 else C.OPD_SUCCEEDED
            n_failed += final == C.OPD_FAILED
            od.plan = [(ti, C.OPD_INITIATED), (tf, final)]
            last = max(last, tf)
            f.op_devices.append(od)
            op.parts.append(p)
        final_op = C.OP_FAILED if n_failed == len(devices) else C.OP_COMPLETED
        op.plan.append((last + rng.randint(1, 60), final_op))
        self._schedule(op.plan[0][0], "op", o)

    def _step_operation(self, o: int) -> None:
        f = self.f
        op = f.operations[o]
        ts, state = op.plan.pop(0)
        op.state = state
        op.updated = max(op.updated, ts)
        op.activity.extend((name, ts) for name in C.OPERATION_ACTIVITY[state])
        if state == C.OP_DISPATCHING:
            for p in op.parts:
                od = f.op_devices[p]
                od.updated = max(od.updated, ts)
                self._schedule(od.plan[0][0], "opdev", p)
        if op.plan:
            self._schedule(op.plan[0][0], "op", o)

    def _step_op_device(self, p: int) -> None:
        f = self.f
        od = f.op_devices[p]
        ts, state = od.plan.pop(0)
        od.state = state
        od.updated = ts
        od.activity.append((C.OP_DEVICE_STATES[state], ts))
        if state == C.OPD_FAILED:
            od.reason = "Device did not converge"
        op = f.operations[od.operation]
        op.updated = max(op.updated, ts)  # operation_stats changed
        if not f.removed[od.device]:
            f.add_event(od.device, ts, C.EV_OPERATION, 0, state)
        if od.plan:
            self._schedule(od.plan[0][0], "opdev", p)
