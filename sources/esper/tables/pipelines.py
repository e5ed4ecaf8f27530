"""Esper Pipelines (`/pipelines/v0/`): Esper's own staged rollouts. Pipelines and their stages,
what each stage will do and to whom (its operation lists' operations, its target lists' devices
or groups), runs, each run's stage runs, and each stage run's operation and target runs (one per
device, each with the command request it sent: `command_id` joins `command_requests`).

No live recording holds these routes: the shapes are the spec's
(docs/spec/esper-pipelines-v0-subset.json, section "Esper Pipelines" of docs/spec/README.md).

Pipelines, stages, the stages' planned lists and runs are small lists read whole each run
(replaced). The run list decides which runs' children are read again: a run still open (not in
`RUN_ENDED`), or one whose `updated_at` moved since the newest `updated_at` the last run read
(`PIPELINE_RUNS_SEEN`, less the lag: a run that ended since then is read once more, as it
ended). A run that had ended by the last read does not change again (the spec says so) and
costs no request. A refused part holds the watermark, so the next run reads those runs again.

A key without `read:pipeline` (403) or a tenant without the feature (404): `pipelines` and
`pipeline_runs` are skipped, with the tables read from them (`tables.DEPENDENTS`), and the run
is partial (exit 6); everything else loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa

from ..common import (
    Named,
    Options,
    OtherParent,
    PerParent,
    items_by_id,
    keep_if_refused,
    keep_what_was_loaded,
    of_parent,
    parent_paths,
    read_each_parent,
    refuse_other_parents,
    side_by_side,
    skip_unavailable,
)
from ..http import EsperClient
from ..run.ledger import RunLedger
from ..run.state import PIPELINE_RUNS_SEEN, advance_watermark, read_from
from ..table import BOOL, INT, JSON, TS, Col, Doc, Evidence, Table, cols
from ..times import parse_time
from .catalogues import (
    VersionLists,
    loaded_versions,
    read_version_lists,
    shared_list,
)

# The spec's run statuses that can no longer change (stage and target runs share them). Not
# `complete`: a complete run still moves on to success or failure, and its stage runs and target
# runs may reach theirs while the run's own record does not move, so it is read like an open one.
RUN_ENDED = frozenset({"success", "failure", "cancelled", "invalid", "timeout"})
_AUDIT = (Col("created_by", INT), Col("updated_by", INT), *cols("created_at updated_at", TS))
_SPEC = Evidence("esper-pipelines-v0-subset.json", "esper-cli pipelines-v0.yaml")

PIPELINES = Table(
    "pipelines",
    "/pipelines/v0/pipelines/",
    ("id",),
    disposition="replace",
    columns=(
        *cols("id enterprise_id name description"),
        *cols("is_active is_valid is_visible is_archived is_default", BOOL),
        Col("timeout_seconds", INT),
        *_AUDIT,
    ),
    doc=Doc(
        read="(spec: `Pipeline`)",
        columns="one row per pipeline: `name`, `description`, `is_active`, `timeout_seconds`",
        kept="replaced each run; a key without `read:pipeline` (403) or a tenant without "
        "Pipelines (404) skips every pipelines table (exit 6)",
        envelope="apps-envelope `{code, message, content: {count, next, previous, results}}`",
        evidence=_SPEC,
    ),
    whole_list="shared",
)
PIPELINE_STAGES = Table(
    "pipeline_stages",
    "/pipelines/v0/pipelines/{id}/stages/",
    ("id",),
    disposition="replace",
    parent="pipelines",
    columns=(
        *cols("id enterprise_id pipeline_id name description"),
        Col("timeout_seconds", INT),
        Col("stage_order", INT),  # the position in the pipeline's list: stages carry no order
        *_AUDIT,
    ),
    doc=Doc(
        read="(spec: `Stage`), per pipeline",
        columns="one row per stage: `pipeline_id`, `name`, `stage_order` (its place in the "
        "pipeline's list, from 1: the spec gives stages no order field)",
        kept="replaced each run (one request per pipeline)",
        envelope="apps-envelope, in stage order",
        evidence=_SPEC,
    ),
)
PIPELINE_RUNS = Table(
    "pipeline_runs",
    "/pipelines/v0/runs/",
    ("id",),
    disposition="replace",
    columns=(
        *cols("id enterprise_id pipeline_id pipeline_name status"),
        Col("run_number", INT),
        Col("status_meta", JSON),
        *_AUDIT,
        *cols("started_at ended_at", TS),
    ),
    doc=Doc(
        read="(spec: `PipelineRun`)",
        columns="one row per run: `pipeline_id`, `run_number`, `status` (the spec's lowercase "
        "enum), `status_meta` (what a running or waiting run is at), `started_at`, `ended_at`",
        kept="replaced each run; decides which runs' stage and target runs are read again",
        envelope="apps-envelope, newest first",
        evidence=_SPEC,
    ),
    whole_list="shared",
)
PIPELINE_STAGE_RUNS = Table(
    "pipeline_stage_runs",
    "/pipelines/v0/runs/{id}/stageruns/",
    ("id",),
    parent="pipeline_runs",
    columns=(
        *cols("id enterprise_id pipeline_id pipeline_run_id stage_id status"),
        Col("stage_meta", JSON),
        *_AUDIT,
        *cols("started_at ended_at", TS),
    ),
    doc=Doc(
        read="(spec: `StageRun`), per run",
        columns="one row per stage run: `pipeline_run_id`, `stage_id`, `status`, `stage_meta` "
        "(the stage's name as the run saw it), `started_at`, `ended_at`",
        kept="merged on `id`; read for runs open or ended since the last run only",
        envelope="apps-envelope, in stage order",
        evidence=_SPEC,
    ),
)
PIPELINE_STAGE_RUN_OPERATIONS = Table(
    "pipeline_stage_run_operations",
    "/pipelines/v0/stageruns/{id}/operations/",
    ("id",),
    parent="pipeline_stage_runs",
    columns=(*cols("id stage_run_id operation_type args"), *_AUDIT),
    doc=Doc(
        read="(spec: `StageRunOperation`), per stage run",
        columns="one row per stage run's operation: `stage_run_id` (added by the loader), "
        "`operation_type`, `args` (JSON text: the released app version)",
        kept="merged on `id`; read with the stage runs",
        envelope="apps-envelope",
        evidence=_SPEC,
    ),
)
PIPELINE_TARGET_RUNS = Table(
    "pipeline_target_runs",
    "/pipelines/v0/stageruns/{id}/targetruns/",
    ("id",),
    parent="pipeline_stage_runs",
    columns=(
        *cols("id target_id device_id device_alias stage_run_id stage_run_operation_id"),
        *cols("command_id command_status status"),
        Col("command_meta", JSON),
        *_AUDIT,
        *cols("started_at ended_at", TS),
    ),
    doc=Doc(
        read="(spec: `TargetRun`), per stage run",
        columns="one row per device of a stage run: `device_id`, `status`, `command_id` "
        "(joins `command_requests`), `command_status`, `command_meta` (the command's reason)",
        kept="merged on `id`; read with the stage runs",
        envelope="apps-envelope, as created",
        evidence=_SPEC,
    ),
)
# A stage's planned lists: its operation lists' operations, its target lists' members (by the
# list's type, the spec's `TargetList_POST` enum; no route lists a COLLECTIONS list's members).
OPERATIONS_PATH = "/pipelines/v0/operationlists/{id}/operations/"
MEMBERS_PATH = "/pipelines/v0/pipelines/{pipeline_id}/targetlists/{id}/"
MEMBERS = {"DEVICES": "targets/", "GROUPS": "devicegroups/"}
PIPELINE_STAGE_OPERATIONS = Table(
    "pipeline_stage_operations",
    "/pipelines/v0/stages/{id}/operationlists/",
    ("id",),
    disposition="replace",
    parent="pipeline_stages",
    columns=(
        *cols("id stage_id pipeline_id operation_list_id operation_list_name"),
        *cols("operation_type args"),
        *_AUDIT,
    ),
    doc=Doc(
        read=f"(spec: `OperationList`), per stage; then `GET {OPERATIONS_PATH}` per list "
        "(spec: `Operation`)",
        columns="one row per operation a stage will carry out: `stage_id`, "
        "`operation_list_name` (of its list), `operation_type` (`INSTALL`, `SET_NEW_POLICY`...), "
        "`args` (JSON text: the package an INSTALL releases; each run's version is the stage "
        "run's operation)",
        kept="replaced each run (one request per pipeline, two per stage, one per list); a "
        "refused part keeps the table as loaded (exit 6)",
        envelope="apps-envelope",
        evidence=_SPEC,
    ),
)
PIPELINE_STAGE_TARGETS = Table(
    "pipeline_stage_targets",
    "/pipelines/v0/stages/{id}/targetlists/",
    ("id", "stage_id", "target_list_id"),
    disposition="replace",
    parent="pipeline_stages",
    columns=(
        *cols("id stage_id pipeline_id target_list_id target_list_name target_list_type"),
        *cols("device_id device_name device_alias device_group_id"),
        Col("is_active", BOOL),
        *_AUDIT,
    ),
    doc=Doc(
        read="(spec: `TargetList`), per stage; then per list `GET "
        f"{MEMBERS_PATH}{MEMBERS['DEVICES']}` (`DEVICES`, spec: `Target`) or "
        f"`{MEMBERS['GROUPS']}` (`GROUPS`, spec: `TargetListDeviceGroup`)",
        columns="one row per device or group a stage targets: `stage_id`, `target_list_type`, "
        "`device_id` and `device_name` (a DEVICES list) or `device_group_id` (a GROUPS list, "
        "resolved to devices when a run reaches the stage)",
        kept="replaced each run, read with the operations; a refused part keeps the table as "
        "loaded (exit 6)",
        envelope="apps-envelope",
        evidence=_SPEC,
    ),
)
TABLES = (
    PIPELINES, PIPELINE_STAGES, PIPELINE_RUNS, PIPELINE_STAGE_RUNS,
    PIPELINE_STAGE_RUN_OPERATIONS, PIPELINE_TARGET_RUNS,
    PIPELINE_STAGE_OPERATIONS, PIPELINE_STAGE_TARGETS,
)  # fmt: skip


@dlt.resource(**PIPELINE_STAGES.hints())
def pipeline_stages(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Every pipeline's stages, numbered in the order the API lists them."""
    with skip_unavailable(ledger, PIPELINE_STAGES.name):
        if ledger.refusals.is_skipped(PIPELINES.name):
            keep_what_was_loaded()  # replaced: an empty read would empty it
            return
        for page in loaded_versions(PIPELINE_STAGES, _stage_lists(client, ledger, opts), ledger):
            yield _numbered(page)


def _stage_lists(client: EsperClient, ledger: RunLedger, opts: Options) -> VersionLists:
    """Every pipeline's stages, read once a run: `pipeline_stages` loads them, the stage plans
    read each stage's lists from them (a run may load either without the other)."""

    def read() -> VersionLists:
        pipelines = PIPELINES.require(shared_list(PIPELINES, client, ledger, opts).items, ledger)
        ids = [p["id"] for p in pipelines]
        return read_version_lists(
            PIPELINE_STAGES, PIPELINES, ids, client, ledger, opts, "pipeline_id"
        )

    return ledger.shared.read_once("pipeline stage lists", read)


def _numbered(page: pa.Table) -> pa.Table:
    """Each stage's place in its pipeline's list (pages keep the API's order per pipeline)."""
    seen: dict[Any, int] = {}
    order = []
    for pipeline_id in page.column("pipeline_id").to_pylist():
        seen[pipeline_id] = seen.get(pipeline_id, 0) + 1
        order.append(seen[pipeline_id])
    return page.set_column(
        page.schema.get_field_index("stage_order"), "stage_order", pa.array(order, pa.int64())
    )


def _runs_to_read(ledger: RunLedger, client: EsperClient, opts: Options) -> tuple[list[str], Any]:
    """The runs whose children are read this run, and the newest `updated_at` of the list."""
    since = read_from(PIPELINE_RUNS_SEEN, opts.lag, ledger)
    runs = PIPELINE_RUNS.require(shared_list(PIPELINE_RUNS, client, ledger, opts).items, ledger)
    newest: datetime | None = None
    wanted = []
    for run in runs:
        updated = parse_time(run.get("updated_at"))
        if updated is not None and (newest is None or updated > newest):
            newest = updated
        moved = since is None or updated is None or updated >= since
        if run.get("status") not in RUN_ENDED or moved:
            wanted.append(run["id"])
    return wanted, newest


class _Children:
    """This run's read of the chosen runs' stage runs, their operations and target runs.

    Each child carries the parent its request named (`pipeline_run_id`, `stage_run_id`), never
    one the item repeats instead. `refused`: whether any part was refused (each counted against
    its own table by `read_each_parent`): the runs' watermark then stays, so they are read again.
    """

    def __init__(self, client: EsperClient, ledger: RunLedger, opts: Options) -> None:
        run_ids, self.newest = _runs_to_read(ledger, client, opts)

        def of_stage_runs(table: Table) -> tuple[PerParent, Named]:  # each stage run's list
            def named(rows: list[dict]) -> dict[str, str]:
                return parent_paths(
                    table, [s["id"] for s in PIPELINE_STAGE_RUNS.require(rows, ledger)], client
                )

            return PerParent(table, PIPELINE_STAGE_RUNS, "stage_run_id"), named

        stage_runs, operations, target_runs = read_each_parent(
            PerParent(PIPELINE_STAGE_RUNS, PIPELINE_RUNS, "pipeline_run_id"),
            parent_paths(PIPELINE_STAGE_RUNS, run_ids, client),
            [of_stage_runs(PIPELINE_STAGE_RUN_OPERATIONS), of_stage_runs(PIPELINE_TARGET_RUNS)],
            client, ledger, opts,
        )  # fmt: skip
        self.stage_runs, self.operations = stage_runs.rows, operations.rows
        self.target_runs = target_runs.rows
        self.refused = bool(stage_runs.refused or operations.refused or target_runs.refused)


def _children(
    table: Table, rows: str, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """`table`'s rows of this run's `_Children` read (shared by the three tables)."""
    with skip_unavailable(ledger, table.name):
        if ledger.refusals.is_skipped(PIPELINE_RUNS.name):
            return
        read = ledger.shared.read_once("pipeline_children", lambda: _Children(client, ledger, opts))
        items = getattr(read, rows)
        if items:
            yield table.page(items, ledger)
        if table is PIPELINE_TARGET_RUNS and not read.refused:  # the last of the three
            advance_watermark(PIPELINE_RUNS_SEEN, read.newest)


@dlt.resource(**PIPELINE_STAGE_RUNS.hints())
def pipeline_stage_runs(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """The stage runs of the runs open, new or ended since the last run."""
    yield from _children(PIPELINE_STAGE_RUNS, "stage_runs", client, ledger, opts)


@dlt.resource(**PIPELINE_STAGE_RUN_OPERATIONS.hints())
def pipeline_stage_run_operations(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Each of those stage runs' operation, as the run carried it out."""
    yield from _children(PIPELINE_STAGE_RUN_OPERATIONS, "operations", client, ledger, opts)


@dlt.resource(**PIPELINE_TARGET_RUNS.hints())
def pipeline_target_runs(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Each of those stage runs' target runs: one per device, with its command request."""
    yield from _children(PIPELINE_TARGET_RUNS, "target_runs", client, ledger, opts)


# The lists a stage's plans are read from, for naming their refused parts (`refused_part`):
# read per stage, never whole, so a 404 is a refusal, never a list gone.
_OPERATION_LISTS = Table("operation_lists", PIPELINE_STAGE_OPERATIONS.path, ("id",))
_TARGET_LISTS = Table("target_lists", PIPELINE_STAGE_TARGETS.path, ("id",))


class _StagePlans:
    """This run's read of what each stage will do and to whom: its operation lists'
    operations and its target lists' devices or groups (the two tables share it), from the
    stages `pipeline_stages` loads (read once: a pipeline whose stages were refused leaves both
    tables incomplete).

    Every row carries the stage, list and pipeline its requests named; an id an item repeats
    is checked against them (`common.of_parent`).
    """

    def __init__(self, client: EsperClient, ledger: RunLedger, opts: Options) -> None:
        read_stages = _stage_lists(client, ledger, opts)
        self.stages_refused = len(read_stages.refused)
        stages = PIPELINE_STAGES.require(read_stages.rows, ledger)
        self._stage_ids = [s["id"] for s in stages]
        self._pipeline_of = {s["id"]: s["pipeline_id"] for s in stages}  # the pipeline asked
        self._asked = (client, ledger, opts)
        side_by_side(client, self._read_operations, self._read_targets)

    def _read_operations(self) -> None:
        """The stages' operation lists, and each list's operations as soon as its stage's lists
        are read."""
        client, ledger, opts = self._asked
        column = "operation_list_id"

        def named(rows: list[dict]) -> dict[str, str]:
            lists = items_by_id(
                rows, ledger, PIPELINE_STAGE_OPERATIONS, column, PIPELINE_STAGE_OPERATIONS.path
            )
            return {ol: OPERATIONS_PATH.format(id=ol) for ol in lists}

        op_lists, operations = read_each_parent(
            PerParent(PIPELINE_STAGE_OPERATIONS, PIPELINE_STAGES, "stage_id"),
            parent_paths(PIPELINE_STAGE_OPERATIONS, self._stage_ids, client),
            [(PerParent(PIPELINE_STAGE_OPERATIONS, _OPERATION_LISTS, "operation_list_id",
                        OPERATIONS_PATH), named)],
            client, ledger, opts,
        )  # fmt: skip
        lists = items_by_id(
            op_lists.rows, ledger, PIPELINE_STAGE_OPERATIONS, column, PIPELINE_STAGE_OPERATIONS.path
        )
        self.operations = []
        others: list[OtherParent] = []
        for op in operations.rows:
            for ol in lists[op["operation_list_id"]]:  # each stage holding the list
                row = {**op, "stage_id": ol["stage_id"], "operation_list_name": ol.get("name")}
                self._add(row, self._pipeline_of[ol["stage_id"]], self.operations, others)
        refuse_other_parents(ledger, PIPELINE_STAGE_OPERATIONS, PIPELINES, "pipeline_id", others)
        self.operations_refused = bool(op_lists.refused or operations.refused or others)

    def _read_targets(self) -> None:
        """The stages' target lists, and each list's devices or groups as soon as its stage's
        lists are read."""
        client, ledger, opts = self._asked
        column = "target_list_id"

        def named(rows: list[dict]) -> dict[str, str]:
            paths = {}
            for list_id, held in items_by_id(
                rows, ledger, PIPELINE_STAGE_TARGETS, column, PIPELINE_STAGE_TARGETS.path
            ).items():
                members = MEMBERS.get(str(held[0].get("target_list_type") or "").upper())
                pipeline = self._pipeline_of[held[0]["stage_id"]]
                if members is not None:  # (a list shared by two stages is read once)
                    paths[list_id] = MEMBERS_PATH.format(pipeline_id=pipeline, id=list_id) + members
            return paths

        target_lists, read = read_each_parent(
            PerParent(PIPELINE_STAGE_TARGETS, PIPELINE_STAGES, "stage_id"),
            parent_paths(PIPELINE_STAGE_TARGETS, self._stage_ids, client),
            [(PerParent(PIPELINE_STAGE_TARGETS, _TARGET_LISTS, "target_list_id",
                        MEMBERS_PATH + "…"), named)],
            client, ledger, opts,
        )  # fmt: skip
        lists = items_by_id(
            target_lists.rows, ledger, PIPELINE_STAGE_TARGETS, column, PIPELINE_STAGE_TARGETS.path
        )
        self.targets = []
        others = []
        for member in read.rows:
            for tl in lists[member["target_list_id"]]:  # each stage holding the list
                row = {**member, "stage_id": tl["stage_id"], "target_list_name": tl.get("name"),
                       "target_list_type": tl.get("target_list_type")}  # fmt: skip
                self._add(row, self._pipeline_of[tl["stage_id"]], self.targets, others)
        refuse_other_parents(ledger, PIPELINE_STAGE_TARGETS, PIPELINES, "pipeline_id", others)
        self.targets_refused = bool(target_lists.refused or read.refused or others)

    @staticmethod
    def _add(row: dict, pipeline: str, rows: list[dict], others: list[OtherParent]) -> None:
        """`row` with the pipeline whose stage it was read for, unless it names another."""
        checked = of_parent([row], "pipeline_id", pipeline)
        if isinstance(checked, OtherParent):
            others.append(checked)
        else:
            rows.extend(checked)


def _stage_plan(
    table: Table, client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """`table`'s rows of this run's `_StagePlans` read; a refused part keeps the table as
    loaded (replacing it would drop that part's rows)."""
    with skip_unavailable(ledger, table.name):
        if ledger.refusals.is_skipped(PIPELINE_STAGES.name):
            keep_what_was_loaded()
            return
        plans = ledger.shared.read_once(
            "pipeline_stage_plans", lambda: _StagePlans(client, ledger, opts)
        )
        name = "operations" if table is PIPELINE_STAGE_OPERATIONS else "targets"
        if plans.stages_refused:  # its own parts' refusals are named by `_read_each`
            ledger.refusals.mark_skipped(
                table.name,
                f"kept as loaded: {plans.stages_refused} pipeline(s) whose stages were refused "
                f"(GET {PIPELINE_STAGES.path})",
                kept=True,
            )
            keep_what_was_loaded()
        elif getattr(plans, f"{name}_refused"):
            keep_if_refused(ledger, table, {"refused"})
        elif rows := getattr(plans, name):
            yield table.page(rows, ledger)


@dlt.resource(**PIPELINE_STAGE_OPERATIONS.hints())
def pipeline_stage_operations(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """What each stage will carry out: its operation lists' operations, replaced each run."""
    yield from _stage_plan(PIPELINE_STAGE_OPERATIONS, client, ledger, opts)


@dlt.resource(**PIPELINE_STAGE_TARGETS.hints())
def pipeline_stage_targets(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Whom each stage targets: its target lists' devices or groups, replaced each run."""
    yield from _stage_plan(PIPELINE_STAGE_TARGETS, client, ledger, opts)


LISTS = (  # and `pipelines`, `pipeline_runs`: `Table.whole_list`
    pipeline_stages,
    pipeline_stage_runs, pipeline_stage_run_operations, pipeline_target_runs,
    pipeline_stage_operations, pipeline_stage_targets,
)  # fmt: skip
