"""The generic alternative: dlt's own `rest_api_source`, configured the way its documentation teaches.

Four resources, declared in one `RESTAPIConfig`: the client (base URL, bearer auth), a paginator per
endpoint (`cursor` = JSONResponseCursorPaginator for `/v2/devices/` started with `cursor=start`,
`json_link` = JSONLinkPaginator on `content.next` for the offset lists), the data selector
`content.results`, `primary_key` + `merge`, and `incremental` on `updated_at` where the record has
one. Command statuses are a child resource resolved from the command request ids
(`request={resources.command_requests.id}`). Everything else is left at dlt's defaults (loader file format, workers, buffer
sizes); only the page size is set to the API's maximum, so the comparison is about the machinery,
not about a forgotten `limit`.

The child resource has no `incremental`: dlt keeps one cursor per resource, not one per parent, so
an `incremental` on `command_statuses` filters each request's statuses against the newest
`updated_at` seen for the requests before it, and drops rows (dlt issue #2429, open; measured
here: 48,097 of 56,675 statuses at 20,000 devices, 87,294 of 512,293 at 100,000). A user who
checks their row counts ends up with this configuration; it loads every row.

Run: `python -m bench.generic --base-url URL --warehouse PATH --pipelines-dir DIR --out JSON`
(key in `BENCH_API_KEY`). Run it twice against the same warehouse and pipelines dir: the second
run is the nightly (incremental) load.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import orjson
from esper_warehouse.sources.esper.settings import EsperSourceConfiguration

PAGE_SIZE = EsperSourceConfiguration.page_size  # the pipeline's, for a like-for-like comparison
EPOCH = "1970-01-01T00:00:00Z"
TABLES = ("devices", "command_requests", "command_statuses", "operations")


def generic_config(base_url: str, api_key: str, page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """The declarative configuration a user of dlt's `rest_api` would write for these four tables."""
    next_link = {"type": "json_link", "next_url_path": "content.next"}
    updated_at = {"cursor_path": "updated_at", "initial_value": EPOCH}
    return {
        "client": {
            "base_url": base_url.rstrip("/") + "/",
            "auth": {"type": "bearer", "token": api_key},
        },
        "resource_defaults": {
            "primary_key": "id",
            "write_disposition": "merge",
            "endpoint": {"data_selector": "content.results", "params": {"limit": page_size}},
        },
        "resources": [
            {
                "name": "devices",
                "endpoint": {
                    "path": "v2/devices/",
                    "params": {"cursor": "start"},
                    "paginator": {
                        "type": "cursor",
                        "cursor_path": "content.next_cursor",
                        "cursor_param": "cursor",
                    },
                    "incremental": updated_at,
                },
            },
            {
                "name": "command_requests",
                "endpoint": {"path": "commands/v0/commands/", "paginator": next_link},
            },
            {
                "name": "command_statuses",
                "endpoint": {
                    "path": "commands/v0/status/",
                    "params": {"request": "{resources.command_requests.id}"},
                    "paginator": next_link,
                },
            },
            {
                "name": "operations",
                "endpoint": {
                    "path": "v0/operations/",
                    "paginator": next_link,
                    "incremental": updated_at,
                },
            },
        ],
    }


def run(base_url: str, api_key: str, warehouse: Path, pipelines_dir: Path) -> dict[str, Any]:
    """One load (the first is full, the next ones incremental); returns rows per table and time."""
    import dlt
    from dlt.sources.rest_api import rest_api_source

    started = time.perf_counter()
    pipeline = dlt.pipeline(
        pipeline_name="bench_generic_rest_api",
        destination=dlt.destinations.duckdb(str(warehouse)),
        dataset_name="esper",
        pipelines_dir=str(pipelines_dir),
    )
    source = rest_api_source(generic_config(base_url, api_key))  # type: ignore[arg-type]
    info = pipeline.run(source)
    wall = time.perf_counter() - started
    trace = pipeline.last_trace
    row_counts: dict[str, int] = {}
    if trace and trace.last_normalize_info:
        row_counts = {
            table: int(n)
            for table, n in trace.last_normalize_info.row_counts.items()
            if not table.startswith("_dlt")
        }
    stages = {
        step.step: (step.finished_at - step.started_at).total_seconds() for step in trace.steps
    }
    return {
        "wall_s": wall,
        "rows": sum(row_counts.values()),
        "row_counts": row_counts,
        "stages_s": stages,
        "loads": len(info.loads_ids),
    }


def main(argv: list[str] | None = None) -> int:
    """Run one generic load and write its result as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.generic")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--pipelines-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = run(args.base_url, os.environ["BENCH_API_KEY"], args.warehouse, args.pipelines_dir)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
