"""Dagster definitions (the `dagster` extra; the core never imports this module).

One asset per raw table (`esper/<table>`) and one per mart (`marts/<name>`), partitioned by
tenant (the static partitions are the names in `tenants.toml`). The marts' lineage comes from the
model SQL: each mart depends on the raw tables (and marts) its staging and intermediate models
read, followed through their `from`/`join` references.

Each partition calls the project's own runner (`pipelines.jobs.tenants.run_tenant`: extract, load,
reconcile, the run ledger, all under the tenant's lock), not `@dlt_assets` (which calls the
source at definition time, i.e. the API, and drops pending packages before each run; see
docs/decisions.md). The load step runs in the pool `esper_api`; the models step builds the
tenant's DuckDB file. A nightly schedule asks for one run per tenant; `orchestration/dagster.yaml`
limits runs to one per tenant (`dagster/partition` tag) and the API pool.

After each tenant's night, the message `run --notify` sends (`pipelines/views/notify.py`, the setting
`notify_urls`): from the models step once the marts (and the night's changes) are built, or
from the load step when the load failed (no models step follows it).

    ESPER_WAREHOUSE__TENANTS_FILE=tenants.toml dagster dev -m esper_warehouse.pipelines.jobs.dagster_defs
"""

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from dagster import AssetExecutionContext, ScheduleEvaluationContext

from ..build import models, raw_contract
from ..exit_codes import LOADED
from ..run.types import RunSettings
from ..views import notify
from .tenants import Tenant, Tenants, build_fleet, load_tenants, run_tenant, tenant_lock

API_POOL = "esper_api"
NIGHTLY_CRON = "0 2 * * *"  # 02:00 UTC
REFERENCE = re.compile(r"\b(esper|seeds|staging|intermediate|marts)\.(\w+)\b")


def raw_tables() -> list[str]:
    """The raw tables the source declares (`raw_contract.py`), without the run bookkeeping."""
    return [name for name in raw_contract.raw_tables() if not name.startswith("_")]


def _references(sql: str) -> set[tuple[str, str]]:
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return set(REFERENCE.findall(code))


def mart_lineage(sql_dir: Path = models.SQL_DIR) -> dict[str, set[dg.AssetKey]]:
    """Each mart's upstream assets: raw tables and marts, through staging and intermediate.

    Raises:
        ValueError: a model names a relation that no file defines (a typo would lose lineage).
    """
    layers = {
        layer: {m.name: m for m in models.load_models(sql_dir, layer)} for layer in models.LAYERS
    }
    raw = set(raw_contract.raw_tables())

    def upstream(layer: str, name: str, seen: set[tuple[str, str]]) -> set[dg.AssetKey]:
        keys: set[dg.AssetKey] = set()
        for ref_layer, ref in _references(layers[layer][name].sql):
            if (ref_layer, ref) in seen or ref_layer == "seeds":
                continue
            seen.add((ref_layer, ref))
            if ref_layer == "esper":
                if ref not in raw:
                    raise ValueError(
                        f"{layer}.{name} reads esper.{ref}, which the source does not declare"
                    )
                if not ref.startswith("_"):
                    keys.add(dg.AssetKey(["esper", ref]))
            elif ref not in layers[ref_layer]:
                raise ValueError(f"{layer}.{name} reads {ref_layer}.{ref}: no such model")
            elif ref_layer == "marts":
                keys.add(dg.AssetKey(["marts", ref]))
            else:
                keys |= upstream(ref_layer, ref, seen)
        return keys

    return {name: upstream("marts", name, set()) for name in layers["marts"]}


def _tenant(tenants: Tenants, context: AssetExecutionContext) -> Tenant:
    return tenants.tenants[context.partition_key]


def build_definitions(
    tenants_path: Path | None = None,
    *,
    base: RunSettings | None = None,
    notify_urls: Sequence[str] | None = None,
) -> dg.Definitions:
    """The definitions for the tenants of `tenants_path` (default: see `tenants.tenants_file`).

    Reads only local files: no request is made until a partition runs.

    Args:
        tenants_path: the tenants file.
        base: the run options every tenant starts from (tests shorten the lock timeout).
        notify_urls: where each night's message goes; default: the setting `notify_urls`,
            read when a step sends (the deployment's environment, not the definitions').
    """
    tenants = load_tenants(tenants_path)
    base = base or RunSettings()
    partitions = dg.StaticPartitionsDefinition(list(tenants.tenants))
    raw_specs = [
        dg.AssetSpec(["esper", table], group_name="raw", kinds={"duckdb"}) for table in raw_tables()
    ]
    lineage = mart_lineage()
    mart_specs = [
        dg.AssetSpec(
            ["marts", name], deps=sorted(deps, key=str), group_name="marts", kinds={"duckdb"}
        )
        for name, deps in lineage.items()
    ]

    def urls() -> list[str]:
        return list(notify_urls) if notify_urls is not None else notify.notify_urls_default()

    esper_load = _load_asset(tenants, base, partitions, raw_specs, urls)
    esper_models = _models_asset(tenants, base, partitions, mart_specs, urls)
    job = dg.define_asset_job(
        "esper_nightly",
        selection=dg.AssetSelection.assets(esper_load, esper_models),
    )
    return dg.Definitions(
        assets=[esper_load, esper_models, _fleet_asset(tenants, base, mart_specs)],
        jobs=[job],
        schedules=[_nightly_schedule(tenants, job)],
    )


def _load_asset(
    tenants: Tenants,
    base: RunSettings,
    partitions: dg.PartitionsDefinition,
    raw_specs: list[dg.AssetSpec],
    urls: Callable[[], list[str]],
) -> dg.AssetsDefinition:
    """`esper_load`: one tenant's run (the project's runner), one materialization per raw table;
    a failed load sends the night's message itself (no models step follows it)."""

    @dg.multi_asset(
        name="esper_load",
        specs=raw_specs,
        partitions_def=partitions,
        pool=API_POOL,
        description="The project's runner for one tenant: extract, load, reconcile, record.",
    )
    def esper_load(context: AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        tenant = _tenant(tenants, context)
        settings = RunSettings(**{**base.__dict__, "build_models": False})
        result = run_tenant(tenant, settings)
        context.log.info(
            f"tenant {tenant.name}: {result.status} (exit {result.exit_code}), "
            f"{sum(result.rows.values())} rows, {result.requests} requests, {result.seconds:.1f} s"
        )
        if result.exit_code not in LOADED:  # a partial run is loaded: its tables materialize
            notify.send(urls(), result, tenant.warehouse)
            raise dg.Failure(
                description=f"tenant {tenant.name}: {result.error}",
                metadata={"exit_code": int(result.exit_code), "run_id": result.run_id},
            )
        for spec in raw_specs:
            table = spec.key.path[-1]
            yield dg.MaterializeResult(
                asset_key=spec.key,
                metadata={"rows_loaded": result.rows.get(table, 0), "run_id": result.run_id},
            )

    return esper_load


def _models_asset(
    tenants: Tenants,
    base: RunSettings,
    partitions: dg.PartitionsDefinition,
    mart_specs: list[dg.AssetSpec],
    urls: Callable[[], list[str]],
) -> dg.AssetsDefinition:
    """`esper_models`: build the SQL models in one tenant's file, one materialization per mart,
    then send the night's message (the outcome its load recorded, the changes just found)."""

    @dg.multi_asset(
        name="esper_models",
        specs=mart_specs,
        partitions_def=partitions,
        description="Build the SQL models (seeds, staging, intermediate, marts) in the tenant's file.",
    )
    def esper_models(context: AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        tenant = _tenant(tenants, context)
        with tenant_lock(tenant, base.lock_timeout_s):
            built = models.build_models(tenant.warehouse, dataset=base.dataset)
            context.log.info(f"tenant {tenant.name}: {len(built)} relations built")
            with duckdb.connect(str(tenant.warehouse), read_only=True) as con:
                for spec in mart_specs:
                    name = spec.key.path[-1]
                    rows = con.execute(f"select count(*) from marts.{name}").fetchone()
                    yield dg.MaterializeResult(
                        asset_key=spec.key, metadata={"rows": int(rows[0]) if rows else 0}
                    )
        night = notify.last_run(tenant.warehouse, base.dataset)
        if night is not None:  # after the build, outside the lock: a message never holds a night
            notify.send(urls(), night, tenant.warehouse)

    return esper_models


def _fleet_asset(
    tenants: Tenants, base: RunSettings, mart_specs: list[dg.AssetSpec]
) -> dg.AssetsDefinition:
    """`fleet/marts`: every tenant's marts in fleet.duckdb, rebuilt after any tenant's marts."""

    @dg.asset(
        key=["fleet", "marts"],
        deps=[spec.key for spec in mart_specs],
        group_name="fleet",
        kinds={"duckdb"},
        automation_condition=dg.AutomationCondition.eager(),
        description=(
            "Every tenant's marts copied into fleet.duckdb with a `tenant` column (the code "
            "`esper-warehouse run --all-tenants` ends with). Rebuilt after any tenant's marts: Dagster's "
            "automation sensor (on by default) requests it."
        ),
    )
    def esper_fleet(context: AssetExecutionContext) -> dg.MaterializeResult:
        rows = build_fleet(tenants, None, lock_timeout_s=base.lock_timeout_s)
        context.log.info(f"fleet: {sum(rows.values())} rows in {len(rows)} marts")
        return dg.MaterializeResult(metadata={f"rows_{name}": n for name, n in rows.items()})

    return esper_fleet


def _nightly_schedule(tenants: Tenants, job: Any) -> dg.ScheduleDefinition:
    """One run request per tenant each night at `NIGHTLY_CRON` (UTC)."""

    @dg.schedule(job=job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC")
    def esper_nightly_schedule(context: ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        night = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for name in tenants.tenants:
            yield dg.RunRequest(run_key=f"{name}-{night}", partition_key=name)

    return esper_nightly_schedule


def __getattr__(name: str) -> dg.Definitions:
    """`defs`, built when Dagster asks for it (`dagster dev -m esper_warehouse.pipelines.jobs.dagster_defs`)."""
    if name == "defs":
        return build_definitions()
    raise AttributeError(name)
