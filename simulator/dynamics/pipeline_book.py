"""What Esper Pipelines hold: pipelines and their stages, runs, stage runs and target runs.

A pipeline is a chain of stages; each stage has one operation (a command: an app INSTALL, a
policy) and one target list (devices, or groups resolved to their devices when the stage
starts). A run goes through the stages one at a time; a stage run makes one target run per
device, and each target run carries out its operation with one command request of the tenant
(`/commands/v0/`), whose status decides the target run's (the mapping the spec's tag
descriptions give, `TARGET_OF_COMMAND`). Statuses are the spec's lowercase enum values
(docs/spec/esper-pipelines-v0-subset.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import DAY, Fleet

PIPELINE_TIMEOUT = 21 * DAY  # the spec's default: a run not finished by then times out
STAGE_TIMEOUT = 7 * DAY  # the spec's: a stage run (and a target run) not finished by then

# A target run follows its command's status (spec, "2_Target Runs": DISPATCHED = queued,
# RUNNING = initiated/acknowledged/in progress, SUCCESS, FAILURE = failed/timed out/cancelled).
TARGET_OF_COMMAND: dict[int, str] = {
    C.CMD_SCHEDULED: "dispatched",
    C.CMD_QUEUED: "dispatched",
    C.CMD_INITIATED: "running",
    C.CMD_ACKNOWLEDGED: "running",
    C.CMD_IN_PROGRESS: "running",
    C.CMD_SUCCESS: "success",
    C.CMD_FAILURE: "failure",
    C.CMD_TIMEOUT: "failure",
    C.CMD_CANCELLED: "failure",
}
ENDED = frozenset({"success", "failure", "cancelled", "timeout", "invalid"})


@dataclass(slots=True)
class Pipeline:
    """A pipeline: its stages in order; ``app`` is the legacy app its INSTALL releases (-1)."""

    id: str
    name: str
    description: str
    command: str  # the operation of every stage: a command of catalog.COMMANDS
    gated: bool  # a stage starts only once an admin approves it (the run WAITs until then)
    created: int
    app: int = -1
    showcase: bool = False  # its runs draw from their own RNG (pipelines.SHOWCASE)
    stages: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Stage:
    """A stage: its target list (``devices``, or ``groups`` resolved when a run reaches it)."""

    id: str
    pipeline: int
    name: str
    description: str
    created: int
    devices: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Run:
    """A pipeline run and what its script holds for it (when an admin acts, if ever)."""

    id: str
    pipeline: int
    number: int
    created: int
    status: str = "running"
    updated: int = 0
    started: int | None = None
    ended: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    stage_runs: list[int] = field(default_factory=list)
    version: int = -1  # the app version this run releases (-1: not an app release)
    approve_after: int | None = None  # seconds an admin takes to approve a gated stage
    pause: tuple[int, int] | None = None  # (stage, seconds after it starts) the admin pauses
    cancel: tuple[int, int] | None = None  # (stage, seconds after it starts) the admin cancels
    paused: bool = False
    holds: dict[str, int] = field(default_factory=dict)  # seconds each step takes (SHOWCASE)


@dataclass(slots=True)
class StageRun:
    """A stage of a run: its operation and its target runs."""

    id: str
    run: int
    stage: int
    created: int
    operation_id: str
    status: str = "running"
    updated: int = 0
    ended: int | None = None
    targets: list[int] = field(default_factory=list)
    ends_by: int = 0  # when the last command dispatched so far reaches its final state


@dataclass(slots=True)
class TargetRun:
    """One device of a stage run; ``command`` is its command request (-1 before dispatch)."""

    id: str
    stage_run: int
    device: int
    created: int
    status: str = "queued"  # until dispatched, or when cancelled, timed out or invalid
    updated: int = 0
    started: int | None = None
    ended: int | None = None
    command: int = -1
    verdict: int = 0  # seconds it stays complete once its command ended, before its outcome


@dataclass
class PipelineBook:
    """Every pipeline entity of the tenant, with id -> index lookups."""

    pipelines: list[Pipeline] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    stage_runs: list[StageRun] = field(default_factory=list)
    target_runs: list[TargetRun] = field(default_factory=list)
    index: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, kind: str, item: Any) -> int:
        """Append ``item`` to the list ``kind`` (``runs``, ...) and index its id."""
        items = getattr(self, kind)
        items.append(item)
        self.index.setdefault(kind, {})[item.id] = len(items) - 1
        return len(items) - 1

    def find(self, kind: str, key: str) -> int | None:
        """The index of the ``kind`` item with id ``key`` (any case), or None."""
        return self.index.get(kind, {}).get(key.lower())


def target_state(
    f: Fleet, t: TargetRun, now: int | None = None
) -> tuple[str, int, int | None, int]:
    """(status, updated, ended, command status index or -1) of target run ``t`` now.

    Before dispatch, and once cancelled, timed out or invalid, the stored status stands;
    otherwise the status follows the command's (``TARGET_OF_COMMAND``). A target run with a
    ``verdict`` is complete for that long once its command ended (the spec: a complete target
    run moves on to success or failure), then has its outcome. ``now``: the clock's time unless
    given (a step of the clock asks at its own time).
    """
    if t.command < 0 or t.status in ("cancelled", "timeout", "invalid"):
        return t.status, t.updated, t.ended, -1
    s = f.commands[t.command].statuses[0]
    st = f.statuses[s]
    status = TARGET_OF_COMMAND[st.state]
    if status not in ENDED:
        return status, max(t.updated, st.updated), None, s
    if (f.now if now is None else now) < st.updated + t.verdict:
        return "complete", max(t.updated, st.updated), None, s
    ended = st.updated + t.verdict
    return status, max(t.updated, ended), ended, s
