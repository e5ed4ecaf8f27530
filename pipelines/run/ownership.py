"""A dataset belongs to one dlt pipeline: a run under another pipeline name is refused.

dlt keeps each pipeline's state (its cursors, what it loaded) under the pipeline's name. A run
under another name on the same dataset finds no state of its own, takes itself for a first load
and appends into full tables: every row twice (a tenant's `warehouses/acme.duckdb` run by hand
with `run --warehouse`, or a single-tenant file later listed in tenants.toml). The owner is the
one pipeline named in the dataset's `_dlt_pipeline_state` table, which dlt writes with every load.
"""

from __future__ import annotations

from typing import Any

from dlt.destinations.exceptions import DatabaseUndefinedRelation
from esper_warehouse.sources.esper.http import EsperConfigError

from .types import PIPELINE_NAME

STATE_TABLE = "_dlt_pipeline_state"  # dlt's own table: one row per load, with `pipeline_name`


def owners(pipeline: Any) -> list[str]:
    """The pipeline names that loaded the pipeline's dataset (none for a new dataset)."""
    with pipeline.sql_client() as client:
        if not client.has_dataset():
            return []
        name = client.make_qualified_table_name(STATE_TABLE)
        try:
            rows = client.execute_sql(f"select distinct pipeline_name from {name}")
        except DatabaseUndefinedRelation:  # no table: nothing was loaded into this dataset yet
            return []
    return sorted(str(row[0]) for row in rows or [])


def how_to_run(owner: str, warehouse: str, dataset: str) -> str:
    """The command that runs the owning pipeline."""
    if owner.startswith(f"{PIPELINE_NAME}__"):  # a tenant's (pipelines/jobs/tenants.py)
        return f"esper-warehouse run --tenant {owner.removeprefix(f'{PIPELINE_NAME}__')}"
    if owner == PIPELINE_NAME:
        return f"esper-warehouse run --warehouse {warehouse} --dataset {dataset}"
    return f"a dlt pipeline named {owner!r} (not esper-warehouse's)"


def check_owner(pipeline: Any, warehouse: str) -> None:
    """Refuse a run whose pipeline is not the one that loaded the dataset.

    Raises:
        EsperConfigError: another pipeline's data is in the dataset (named, with its command).
    """
    others = [name for name in owners(pipeline) if name != pipeline.pipeline_name]
    if not others:
        return
    dataset = pipeline.dataset_name
    commands = "; ".join(f"{name}: {how_to_run(name, warehouse, dataset)}" for name in others)
    raise EsperConfigError(
        f"dataset {dataset!r} in {warehouse} belongs to the pipeline {', '.join(others)}, not "
        f"{pipeline.pipeline_name}: a run under another pipeline would load every table again "
        f"(duplicate rows), so nothing was loaded. Run it as its owner ({commands}), or load "
        "this pipeline into another warehouse file or --dataset"
    )
