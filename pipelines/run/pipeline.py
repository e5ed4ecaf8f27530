"""The dlt pipeline of a run: dlt's settings, the pipeline beside the warehouse, the checks first.

Also the run's own settings read from dlt's configuration (`lock_timeout_s`,
`load_memory_limit` in the `[esper_warehouse]` section, or `ESPER_WAREHOUSE__...`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import dlt
from esper_warehouse.sources.esper.http import EsperConfigError, EsperError
from esper_warehouse.sources.esper.settings import (
    EsperSourceConfiguration,
    SettingError,
    resolve_settings,
)
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.data_tap_jobs import table_name as data_tap_table

from ..warehouse import working_dir
from .failures import toml_problem
from .types import RunSettings

# dlt settings this product relies on; an admin's environment or config.toml can still set them.
# (Telemetry is off from the package's import on: pipelines/__init__.py.)
DLT_DEFAULTS = {
    "EXTRACT__NEXT_ITEM_MODE": "fifo",  # device events read what the other resources saw
    # A pool thread per table: the tail's reads (sources/esper/run/tail.py) each hold one for as
    # long as their requests wait, so with dlt's 5 the sixth list waited for one of the first
    # five to end (a refused one: its `Retry-After`). The client's limiter bounds the requests.
    "EXTRACT__WORKERS": str(len(TABLES)),
    "NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_ID": "true",  # scd2 on Arrow needs _dlt_id
    "NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID": "true",  # freshness per table
    # Files of at most 100,000 rows: normalize reads a whole file at once, and 2.6 million device
    # events of a 100,000-device first load in one file took it to 4 GB.
    "DATA_WRITER__FILE_MAX_ITEMS": "100000",
    # dlt keeps every loaded package's data files in the working folder beside the warehouse
    # unless told otherwise: 22 MB after the 14 nights of `make demo`, a night's extract more
    # every night. What was loaded is in the warehouse; the packages keep their state and schema.
    "LOAD__DELETE_COMPLETED_JOBS": "true",
}
# ... and for DuckDB: one load job at a time. A DuckDB file has one writer, and dlt's default of
# 20 parallel jobs only multiplied the load's memory (20,000 devices: peak 812 MB -> 335 MB).
DUCKDB_DEFAULTS = {"LOAD__WORKERS": "1"}


def lock_timeout_default() -> float:
    """`esper_warehouse.lock_timeout_s` from dlt's configuration, else 300 s."""
    value = dlt.config.get("esper_warehouse.lock_timeout_s")
    return float(value) if value is not None else 300.0


def load_memory_limit_default() -> str | None:
    """`esper_warehouse.load_memory_limit` from dlt's configuration, else None (the run sets
    one that follows the fleet: `held.load_memory_for`)."""
    value = dlt.config.get("esper_warehouse.load_memory_limit")
    return str(value) if value is not None else None


def _without_json_hint_warning(record: logging.LogRecord) -> bool:
    """Arrow JSON columns differ from dlt's json hint by design; dlt warns once per page about it."""
    return "several column hints were different" not in record.getMessage()


def configure_dlt(destination: str) -> None:
    """The dlt settings above, unless the environment sets them; dlt's known-noise filter."""
    defaults = {**DLT_DEFAULTS, **(DUCKDB_DEFAULTS if destination == "duckdb" else {})}
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    logging.getLogger("dlt").addFilter(_without_json_hint_warning)  # a filter is added only once


def make_pipeline(settings: RunSettings) -> dlt.Pipeline:
    """A dlt pipeline whose working directory sits beside the warehouse file."""
    configure_dlt(settings.destination)
    warehouse = settings.warehouse.resolve()
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    destination: Any = settings.destination
    if settings.destination == "duckdb" and warehouse.stem == settings.dataset:
        # DuckDB names the file's catalog after its stem: `esper.devices` would be ambiguous, and
        # dlt's own load fails with a Binder error.
        raise EsperConfigError(
            f"the warehouse file {warehouse.name} is named like the dataset {settings.dataset!r}; "
            "choose another file name (default esper_warehouse.duckdb) or another --dataset"
        )
    if settings.destination == "duckdb":
        destination = dlt.destinations.duckdb(str(warehouse))
    return dlt.pipeline(
        pipeline_name=settings.pipeline_name,
        destination=destination,
        dataset_name=settings.dataset,
        pipelines_dir=str(working_dir(warehouse)),
    )


def source_settings(settings: RunSettings) -> EsperSourceConfiguration:
    """The source's settings for this run, resolved by dlt as `esper()` would resolve them (the
    run's explicit `source_options` first, then the environment and .dlt/*.toml, under the
    run's pipeline name first), typed and checked; the run hands this object to `esper`.

    Raises:
        EsperConfigError: a value outside what its setting accepts (named, with its variable and
            range), a Data Tap query name that makes no table name, or a .dlt/config.toml /
            secrets.toml that is not valid TOML (the file and the line).
        ConfigFieldMissingException: a required setting (the key, the base URL, the enterprise
            id) set nowhere: exit 2, naming its variable (`failures.missing_setting`).
    """
    try:
        config = resolve_settings(settings.source_options, pipeline_name=settings.pipeline_name)
        for name in config.data_tap_queries or {}:
            data_tap_table(name)
        return config
    except (SettingError, EsperError) as error:
        raise EsperConfigError(str(error)) from None
    except Exception as error:
        if (problem := toml_problem(error)) is None:
            raise
        raise EsperConfigError(problem) from None
