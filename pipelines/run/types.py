"""What a run is given and what it returns: `RunSettings`, `RunResult`, the pipeline's name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

PIPELINE_NAME = "esper_warehouse"


@dataclass
class RunSettings:
    """Where and how to load (the command line's `run` options)."""

    warehouse: Path = Path("esper_warehouse.duckdb")
    destination: str = "duckdb"
    dataset: str = "esper"
    resources: Sequence[str] | None = None
    full: bool = False
    lock_timeout_s: float = 300.0
    # DuckDB's memory for the load and the bookkeeping after it (it spills to disk beyond it)
    load_memory_limit: str | None = None  # None: follows the fleet (held.load_memory_for)
    build_models: bool = True
    # Explicit values of the source's settings (`EsperSourceConfiguration`'s names, e.g.
    # base_url, api_key): they win over the environment and .dlt/*.toml, as arguments do in dlt
    source_options: dict[str, Any] = field(default_factory=dict)
    # where the key and the base URL came from, named when the API refuses them (a tenant's)
    api_key_name: str | None = None
    base_url_name: str | None = None
    pipeline_name: str = PIPELINE_NAME  # one per tenant (pipelines/jobs/tenants.py)


@dataclass
class RunResult:
    """What a run did, for the summary and the tests."""

    run_id: str
    exit_code: int
    status: str
    mode: str = "incremental"
    as_of: datetime | None = None
    clock: str | None = None  # why the API's Date was not the run's as_of (run/clock.py)
    rows: dict[str, int] = field(default_factory=dict)
    reconciliation: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    retries: int = 0
    throttled: int = 0
    seconds: float = 0.0
    error: str | None = None
    models: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # table -> why it was skipped
    # table -> how this run treated it (loaded, partial, kept, skipped; route, status, why):
    # every table its resources read (`Refusals.treatments`), the freshness model's input
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    parts: int = 0  # parts of a full scan in parts committed by this run (scan/walk.py)
    unreadable: dict[str, int] = field(default_factory=dict)  # table.column -> values read as NULL
    # the records set aside (served without their key, cursor or parent key): `_esper_rejected`
    rejected: list[dict[str, Any]] = field(default_factory=list)
    # How the run was paced (EsperClient.pacing): requests answered (not 429), their average
    # rate, the 429s the pacer judged not this run's doing, the pace it ended at (None: unpaced).
    answered: int = 0
    answered_per_s: float | None = None
    not_ours: int = 0
    pace: float | None = None
    # the API's device count as the run opened (its first request): what the warehouse counts
    # beyond it after a nightly are removals only a full scan names (marts.headlines)
    device_count: int | None = None
