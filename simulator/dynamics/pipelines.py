"""Esper Pipelines over the simulated days: staged releases, run stage by stage.

Three pipelines, defined 60 days before the simulator's start (:meth:`plan_pipelines`):

- an app release of the tenant's most installed Android app in three stages (pilot on 5 devices, 10 %
  of the devices that have the app, everyone: the rest, at most 60), promoted automatically a
  day after each stage completes;
- an OS update, staged as the policy that schedules it (``SET_NEW_POLICY``: the pipelines'
  operation types hold no OS update the command API accepts) in two stages (pilot on 3 Android
  devices, then a tenth of them, 40 at most);
- an app release of its second most installed Android app to store groups (their devices that
  have it), each stage gated by an admin's approval: the run is WAITING between stages until
  someone approves.

An app release stages the newest version the tenant has published (`Rollouts` publishes them);
a successful INSTALL moves a device that has an older one to it. Nothing else of the fleet
changes, so its history (devices, apps, ad-hoc commands) is the same with or without pipelines:
they draw from their own RNG and add only their command requests, statuses and events.

Runs are scripted relative to the start (``SCRIPT``), so whatever the seed the default tenant
holds, at its start, a finished release, a run that timed out waiting for an approval that never
came (21 days), a paused run whose stage timed out (7 days, its undispatched target runs too),
a run cancelled mid-stage, a run WAITING for approval (given 5.5 days after it is asked) and the
OS update policy started the day before, whose fleet stage waits on devices gone dark (its own
record has not changed for more than a day two days after the start, but its target runs have:
the dark devices' commands time out; not stalled); after the start, the OS update policy every
12 days, an app release every 14 days and a store rollout whose approver takes 10 days. So a
tenant two days on (the tests' warehouse) and two weeks on (the demo's) each hold runs not
ended of every kind the morning check counts: running, waiting for an approval, stalled a day
or more (a showcase run, below), failing. The policy changes no app, so the runs about the start move
no device's apps (the nightly's app re-reads stay those of the fleet's own changes).

Two more pipelines show the statuses of the spec a run passes through too quickly for a nightly
read to see (``SHOWCASE``, their own RNG: the runs above stay as they were): "Wi-Fi settings",
one stage to one reachable Android device that answers as scripted, and "Kiosk lockdown
(draft)", with no stage (its run is INVALID: the spec's "pipeline has zero stages"). Each
Wi-Fi settings run holds one step for hours (``Run.holds``), so the read after it, at midnight,
sees it: a run PENDING, QUEUED or PROCESSING; a stage run PROCESSING whose target run is
PENDING; a target run PROCESSING (its command being created) or RUNNING (its device taking
hours); a target run and stage run COMPLETE, and a run COMPLETE, before their outcome. The
device succeeds, so those runs end in SUCCESS. They start on the first two days (most on the
second: the first nightly read stays a light one), so the first two nights from the start read
every run and target run status of the spec at least once. A run of it every 4 days is stuck for 3
days (nothing in it changes): the stalled run of the two days on and two weeks on.

A stage run dispatches its target runs in batches (``DISPATCH_BATCH`` every ``DISPATCH_EVERY``):
each is one command request of the tenant to its device (`CommandsAndOperations.issue_to_device`,
the same legal status path as every command), so a target run fails when its command fails, with
the command's reason. A stage run succeeds when all its target runs do, else it fails; the run
succeeds when all its stage runs do (the spec's tag descriptions). A target run whose device was
removed before dispatch is invalid. A cancel or a timeout ends the target runs not yet
dispatched; those dispatched follow their commands to the end.
"""

from __future__ import annotations

import random
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.dynamics.commands import CommandsAndOperations
from esper_warehouse.simulator.dynamics.pipeline_book import (
    PIPELINE_TIMEOUT,
    STAGE_TIMEOUT,
    Pipeline,
    Run,
    Stage,
    StageRun,
    TargetRun,
    target_state,
)
from esper_warehouse.simulator.fleet import DAY, HOUR, derived_id, new_id
from esper_warehouse.simulator.people import sender

ADMIN = 0  # the person of `people.PEOPLE` who runs the pipelines (an Enterprise Admin)
DISPATCH_BATCH = 5  # target runs dispatched at a time ...
DISPATCH_EVERY = 15 * 60  # ... every this many seconds
SOAK = DAY  # an automatic promotion waits this long after a stage completes
RELEASE_EVERY = 14 * DAY  # after the script, the app release pipeline runs this often
APP_STAGES = (("Pilot", 5), ("10 %", 30), ("Everyone", 60))  # (name, at most this many devices)
# (day from the start, hour, pipeline, what the admin does): approve after N hours, pause or
# cancel a stage N minutes after it starts, nothing (a gated run then times out after 21 days),
# or start the next run every N seconds
SCRIPT: tuple[tuple[int, int, int, dict[str, Any]], ...] = (
    (-27, 9, 0, {}),
    (-26, 10, 2, {}),
    (-18, 9, 1, {"pause": (1, 20 * 60)}),
    (-9, 9, 0, {"cancel": (2, 20 * 60)}),
    (-4, 11, 2, {"approve_after": 132 * HOUR}),
    (-1, 9, 1, {}),
    (1, 9, 1, {"every": 12 * DAY}),
    (6, 9, 0, {"every": RELEASE_EVERY}),
    (8, 10, 2, {"approve_after": 240 * HOUR}),
)
WIFI, DRAFT = 3, 4  # the showcase pipelines
# (day from the start, hour, pipeline, seconds each step takes: a run's ``pending``, ``queued``,
# ``processing``; its stage run's ``stage_processing``, then ``dispatch`` (its target runs
# QUEUED that long); a target run's ``target_processing``; ``device`` (its command's success
# after that long); ``verdict`` (a complete target run and stage run before their outcome),
# ``run_verdict`` (a complete run before its outcome); ``complete_together`` (the run is complete
# as soon as its last stage run is, before that stage run's outcome: "all stage runs are
# processed", the spec's other reading). Each is read, at the next midnight, in the step it
# holds. The run of day 0 at 20:00 is complete over three midnights, and its stage run and target
# run reach their outcome between the first two while the run's record does not move. Eight days before the start an admin pauses a run before its target run
# is dispatched: the stage run, and that target run, time out 7 days later. From the start,
# every 4 days, a run whose target run is stuck for 3 days creating its command: nothing in it
# changes, so it is stalled from the next day but one (38 hours unchanged at the midnight read).
SHOWCASE: tuple[tuple[int, int, int, dict[str, Any]], ...] = (
    (-8, 9, WIFI, {"holds": {"dispatch": HOUR}, "pause": (0, 600)}),
    (0, 10, WIFI, {"holds": {"target_processing": 3 * DAY}, "every": 4 * DAY}),
    (0, 12, DRAFT, {"holds": {}}),
    (0, 23, WIFI, {"holds": {"pending": 2 * HOUR}}),
    (1, 22, WIFI, {"holds": {"dispatch": 3 * HOUR}}),
    (1, 23, WIFI, {"holds": {"pending": 600, "queued": 2 * HOUR}}),
    (1, 23, WIFI, {"holds": {"pending": 600, "queued": 600, "processing": 2 * HOUR}}),
    (1, 23, WIFI, {"holds": {"stage_processing": 2 * HOUR}}),
    (1, 23, WIFI, {"holds": {"target_processing": 2 * HOUR}}),
    (1, 23, WIFI, {"holds": {"device": 3 * HOUR}}),
    (1, 22, WIFI, {"holds": {"verdict": 3 * HOUR}}),
    (1, 19, WIFI, {"holds": {"verdict": 600, "run_verdict": 8 * HOUR}}),
    (0, 20, WIFI, {"holds": {"verdict": 26 * HOUR, "run_verdict": 30 * HOUR,
                             "complete_together": 1}}),
)  # fmt: skip


class PipelineRuns(CommandsAndOperations):
    """Defining the pipelines, starting their runs and moving them stage by stage."""

    def plan_pipelines(self, start: int) -> None:
        """Define the pipelines and schedule the scripted runs (``SCRIPT``) around ``start``."""
        f, rng, book = self.f, self.pipe_rng, self.book
        created = start - 60 * DAY
        live = [i for i in range(len(f.ids)) if not f.removed[i] and f.platform(i) == C.ANDROID]
        installs = [0] * len(f.legacy_apps)
        for i in live:
            for a, *_rest in f.apps[i]:
                installs[a] += 1
        own = [k for k, a in enumerate(f.legacy_apps) if a.kind == "ENTERPRISE"]  # the tenant's
        app, gated_app, *_others = sorted(own, key=lambda k: (-installs[k], k))
        name = f.legacy_apps[app].name
        p = book.add("pipelines", Pipeline(new_id(rng), f"{name} release", f"Stage a new version "
                     f"of {name} to its devices", "INSTALL", False, created, app))  # fmt: skip
        having = [i for i in live if any(e[0] == app for e in f.apps[i])]
        rng.shuffle(having)
        having.sort(key=lambda i: f.dark[i] or f.last_seen[i] < 0)  # pilots are reachable
        for k, (stage, most) in enumerate(APP_STAGES):
            take = max(1, len(having) // 10) if k == 1 else most
            self._stage(p, stage, created + k * 60, devices=having[: min(take, most)])
            having = having[min(take, most) :]
        p = book.add("pipelines", Pipeline(new_id(rng), "OS update policy", "Apply the policy that "
                     "schedules the new OS update, pilot devices first", "SET_NEW_POLICY", False,
                     created))  # fmt: skip
        rng.shuffle(live)
        self._stage(p, "Pilot", created, devices=sorted(live[:3]))
        fleet = min(40, max(5, len(live) // 10))  # a tenth of the Android devices, 40 at most
        self._stage(p, "Android fleet", created + 60, devices=sorted(live[3 : 3 + fleet]))
        name = f.legacy_apps[gated_app].name
        p = book.add("pipelines", Pipeline(new_id(rng), f"{name} store rollout", "Each stage "
                     "starts once approved", "INSTALL", True, created, gated_app))  # fmt: skip
        region = f.groups[f.leaf_groups[0]].parent
        stores = [g for g in f.leaf_groups if f.groups[g].parent == region] or f.leaf_groups
        self._stage(p, f"Pilot store ({f.groups[stores[0]].name})", created, groups=stores[:1])
        self._stage(p, "Region stores", created + 60, groups=stores[1:3] or stores[:1])
        for day, hour, pipeline, acts in SCRIPT:
            self._plan_run(start // DAY * DAY + day * DAY + hour * HOUR, pipeline, acts)
        self._plan_showcase(start, created, live)

    def _plan_showcase(self, start: int, created: int, live: list[int]) -> None:
        """The showcase pipelines (``SHOWCASE``) and their runs."""
        f, rng, book = self.f, self.show_rng, self.book
        reachable = sorted(i for i in live if not f.dark[i] and f.last_seen[i] >= 0)
        device = next(
            (i for i in reachable if sender(f, ADMIN, "SET_WIFI_STATE", -1, [i]) is not None), -1
        )
        p = book.add("pipelines", Pipeline(new_id(rng), "Wi-Fi settings", "Turn Wi-Fi on, one "
                     "device first", "SET_WIFI_STATE", False, created, showcase=True))  # fmt: skip
        if device >= 0:
            self._stage(p, "Pilot", created, devices=[device])
        book.add("pipelines", Pipeline(new_id(rng), "Kiosk lockdown (draft)", "Not set up yet",
                 "SET_KIOSK_APP", False, created, showcase=True))  # fmt: skip
        for day, hour, pipeline, acts in SHOWCASE:
            self._plan_run(start // DAY * DAY + day * DAY + hour * HOUR, pipeline, acts)

    def _rng(self, p: int) -> random.Random:
        return self.show_rng if self.book.pipelines[p].showcase else self.pipe_rng

    def _stage(self, p: int, name: str, created: int, **targets: list[int]) -> None:
        book = self.book
        pipeline = book.pipelines[p]
        stage = Stage(derived_id("stage", pipeline.id, name), p, name, "", created, **targets)
        stage.description = f"{pipeline.command} to {name}"
        pipeline.stages.append(book.add("stages", stage))

    def _plan_run(self, ts: int, pipeline: int, acts: dict) -> None:
        self.pipe_plans.append((pipeline, acts))
        self._later(ts, "start", len(self.pipe_plans) - 1)

    def _later(self, ts: int, action: str, index: int) -> None:
        self.pipe_steps.append((action, index))
        self._schedule(ts, "pipeline", len(self.pipe_steps) - 1)

    def _step_pipeline(self, idx: int, ts: int) -> None:
        action, k = self.pipe_steps[idx]
        getattr(self, f"_on_{action}")(k, ts)

    # -- runs ----------------------------------------------------------------------------

    def _on_start(self, plan: int, ts: int) -> None:
        f, book = self.f, self.book
        p, acts = self.pipe_plans[plan]
        rng = self._rng(p)
        pipeline = book.pipelines[p]
        run = Run(new_id(rng), p, len(pipeline.runs) + 1, ts, updated=ts + 5, started=ts + 5)
        run.approve_after = acts.get("approve_after")
        run.pause, run.cancel = acts.get("pause"), acts.get("cancel")
        if pipeline.app >= 0:  # the newest version the tenant has published
            run.version = len(f.legacy_apps[pipeline.app].versions) - 1
        r = book.add("runs", run)
        pipeline.runs.append(r)
        self._later(ts + 5 + PIPELINE_TIMEOUT, "run_timeout", r)
        if "every" in acts:
            self._plan_run(ts + acts["every"], p, acts)
        if "holds" in acts:  # a showcase run: created PENDING, then queued and processed
            run.holds = acts["holds"]
            run.status, run.updated, run.started = "pending", ts, None
            self._later(ts + run.holds.get("pending", 1), "queued", r)
            return
        self._start_stage(r, 0, ts + 5)

    def _on_queued(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        run.status, run.updated = "queued", ts
        self._later(ts + run.holds.get("queued", 1), "processing", r)

    def _on_processing(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        run.status, run.updated = "processing", ts
        self._later(ts + run.holds.get("processing", 3), "begin", r)

    def _on_begin(self, r: int, ts: int) -> None:
        book = self.book
        run = book.runs[r]
        if not book.pipelines[run.pipeline].stages:  # the spec: a pipeline with zero stages
            self._finish_run(r, ts, "invalid")
            return
        run.status, run.updated, run.started = "running", ts, ts
        self._start_stage(r, 0, ts)

    def _finish_run(self, r: int, ts: int, status: str) -> None:
        run = self.book.runs[r]
        run.status, run.ended, run.updated, run.meta = status, ts, ts, {}

    def _on_run_verdict(self, r: int, ts: int) -> None:
        if self.book.runs[r].status == "complete":
            self._run_verdict(r, ts)

    def _run_verdict(self, r: int, ts: int) -> None:
        book = self.book
        done = all(book.stage_runs[s].status == "success" for s in book.runs[r].stage_runs)
        self._finish_run(r, ts, "success" if done else "failure")

    def _on_run_timeout(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        if run.ended is None:
            if run.stage_runs:
                self._end_stage(run.stage_runs[-1], ts, "timeout")
            self._finish_run(r, ts, "timeout")

    def _on_cancel(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        if run.ended is None:
            self._end_stage(run.stage_runs[-1], ts, "cancelled")
            self._finish_run(r, ts, "cancelled")

    def _on_pause(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        if run.ended is None:
            run.paused, run.status, run.updated = True, "waiting", ts
            run.meta = {"reason": "Paused by user"}

    def _on_approve(self, r: int, ts: int) -> None:
        run = self.book.runs[r]
        if run.status == "waiting" and not run.paused:
            run.status, run.updated, run.meta = "running", ts, {}
            self._start_stage(r, len(run.stage_runs), ts)

    def _on_promote(self, r: int, ts: int) -> None:
        if self.book.runs[r].ended is None:
            self._start_stage(r, len(self.book.runs[r].stage_runs), ts)

    # -- stage runs ----------------------------------------------------------------------

    def _start_stage(self, r: int, k: int, ts: int) -> None:
        f, book = self.f, self.book
        run = book.runs[r]
        rng = self._rng(run.pipeline)
        stage = book.stages[book.pipelines[run.pipeline].stages[k]]
        app = book.pipelines[run.pipeline].app
        devices = stage.devices or sorted(  # a group's devices that have the app (Android's)
            i
            for g in stage.groups
            for i in self._members_of(g)
            if not f.removed[i]
            and f.platform(i) == C.ANDROID
            and any(e[0] == app for e in f.apps[i])
        )
        sr = StageRun(new_id(rng), r, book.pipelines[run.pipeline].stages[k], ts, new_id(rng))
        sr.updated = ts
        s = book.add("stage_runs", sr)
        run.stage_runs.append(s)
        run.updated = ts
        run.meta = {"current_stage": stage.name}
        for d in devices:
            sr.targets.append(book.add("target_runs", TargetRun(new_id(rng), s, d, ts, updated=ts)))
        if not devices:
            sr.status, sr.ended = "invalid", ts
            self._after_stage(r, ts)
            return
        if "stage_processing" in run.holds:  # creating its target runs, PENDING till it runs
            sr.status = "processing"
            for t in sr.targets:
                book.target_runs[t].status = "pending"
            self._later(ts + run.holds["stage_processing"], "stage_begin", s)
        else:
            self._later(ts + run.holds.get("dispatch", 60), "dispatch", s)
        self._later(ts + STAGE_TIMEOUT, "stage_timeout", s)
        for act, name in ((run.pause, "pause"), (run.cancel, "cancel")):
            if act is not None and act[0] == k:
                self._later(ts + act[1], name, r)

    def _on_stage_begin(self, s: int, ts: int) -> None:
        book = self.book
        sr = book.stage_runs[s]
        if sr.status != "processing":
            return
        sr.status, sr.updated = "running", ts
        for t in sr.targets:
            book.target_runs[t].status, book.target_runs[t].updated = "queued", ts
        self._later(ts + self.book.runs[sr.run].holds.get("dispatch", 60), "dispatch", s)

    def _on_dispatch(self, s: int, ts: int) -> None:
        book = self.book
        sr = book.stage_runs[s]
        run = book.runs[sr.run]
        if sr.status != "running" or run.paused:
            return
        waiting = [t for t in sr.targets if book.target_runs[t].status == "queued"]
        for t in waiting[:DISPATCH_BATCH]:
            tr = book.target_runs[t]
            tr.updated = ts
            if "target_processing" in run.holds:  # its command request being created
                tr.status = "processing"
                self._later(ts + run.holds["target_processing"], "send", t)
                continue
            self._send(t, ts)
        if len(waiting) > DISPATCH_BATCH:
            self._later(ts + DISPATCH_EVERY, "dispatch", s)
        elif "target_processing" not in run.holds:  # else each target run's send does it
            self._later(max(ts, sr.ends_by) + 1, "stage_done", s)

    def _on_send(self, t: int, ts: int) -> None:
        """A target run held PROCESSING sends its command now; its stage run is done after."""
        book = self.book
        tr = book.target_runs[t]
        sr = book.stage_runs[tr.stage_run]
        if tr.status == "processing" and sr.status == "running":
            self._send(t, ts)
            self._later(max(ts, sr.ends_by) + 1, "stage_done", tr.stage_run)

    def _send(self, t: int, ts: int) -> None:
        """Target run ``t`` sends its command (or is invalid: device gone, nobody may send it)."""
        f, book = self.f, self.book
        tr = book.target_runs[t]
        sr = book.stage_runs[tr.stage_run]
        run = book.runs[sr.run]
        pipeline = book.pipelines[run.pipeline]
        tr.updated = ts
        if f.removed[tr.device]:
            tr.status, tr.ended = "invalid", ts
            return
        who = sender(f, ADMIN, pipeline.command, -1, [tr.device])
        if who is None:  # nobody may send it to that device: the target run cannot run
            tr.status, tr.ended = "invalid", ts
            return
        how: dict[str, object] = {"created_by": who}
        if pipeline.app >= 0:
            app = f.legacy_apps[pipeline.app]
            version = app.versions[run.version].id
            how["args"] = {"package_name": app.package, "app_version": version}
            how["install"] = (pipeline.app, run.version)
        if pipeline.showcase:  # the scripted device: acknowledges at once, done after `device`
            done = run.holds.get("device", 300)
            how["plan"] = [(60, C.CMD_INITIATED), (90, C.CMD_ACKNOWLEDGED),
                           (120, C.CMD_IN_PROGRESS), (done, C.CMD_SUCCESS)]  # fmt: skip
            tr.verdict = run.holds.get("verdict", 0)
        rng = self._rng(run.pipeline)
        tr.command = self.issue_to_device(rng, ts, tr.device, pipeline.command, **how)
        tr.status, tr.started = "dispatched", ts
        plan = f.statuses[f.commands[tr.command].statuses[0]].plan
        sr.ends_by = max(sr.ends_by, plan[-1][0] if plan else ts)

    def _on_stage_done(self, s: int, ts: int) -> None:
        book = self.book
        sr = book.stage_runs[s]
        if sr.status != "running":
            return
        verdict = book.runs[sr.run].holds.get("verdict", 0)
        if verdict:  # the spec: complete once every target run is, then its outcome
            sr.status, sr.updated = "complete", ts
            run = book.runs[sr.run]
            last = len(run.stage_runs) == len(book.pipelines[run.pipeline].stages)
            if last and run.holds.get("complete_together"):
                run.status, run.updated = "complete", ts
            self._later(ts + verdict, "stage_verdict", s)
            return
        self._stage_verdict(s, ts)

    def _on_stage_verdict(self, s: int, ts: int) -> None:
        if self.book.stage_runs[s].status == "complete":
            self._stage_verdict(s, ts)

    def _stage_verdict(self, s: int, ts: int) -> None:
        f, book = self.f, self.book
        sr = book.stage_runs[s]
        states = [target_state(f, book.target_runs[t], ts)[0] for t in sr.targets]
        sr.status = "success" if all(x == "success" for x in states) else "failure"
        sr.ended = sr.updated = ts
        self._after_stage(sr.run, ts)

    def _on_stage_timeout(self, s: int, ts: int) -> None:
        sr = self.book.stage_runs[s]
        if sr.status == "running":
            self._end_stage(s, ts, "timeout")
            self._finish_run(sr.run, ts, "failure")

    def _end_stage(self, s: int, ts: int, status: str) -> None:
        """End a running stage run; its target runs not yet dispatched end with it."""
        book = self.book
        sr = book.stage_runs[s]
        if sr.status != "running":
            return
        sr.status, sr.ended, sr.updated = status, ts, ts
        for t in sr.targets:
            tr = book.target_runs[t]
            if tr.status in ("pending", "queued", "processing"):
                tr.status, tr.ended, tr.updated = status, ts, ts

    def _after_stage(self, r: int, ts: int) -> None:
        book = self.book
        run = book.runs[r]
        pipeline = book.pipelines[run.pipeline]
        if len(run.stage_runs) == len(pipeline.stages):
            if "run_verdict" in run.holds:  # the spec: complete, then its outcome
                if run.status != "complete":  # complete already with its stage run: unmoved
                    run.status, run.updated = "complete", ts
                self._later(ts + run.holds["run_verdict"], "run_verdict", r)
                return
            self._run_verdict(r, ts)
            return
        run.updated = ts
        if not pipeline.gated:
            self._later(ts + SOAK, "promote", r)
            return
        following = book.stages[pipeline.stages[len(run.stage_runs)]].name
        run.status = "waiting"
        run.meta = {"reason": f"Waiting for approval to start stage {following}"}
        if run.approve_after is not None:
            self._later(ts + run.approve_after, "approve", r)
