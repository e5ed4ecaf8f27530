"""The dlt floor: what any dlt pipeline pays before it loads anything.

A fresh process imports dlt, creates a pipeline into an empty DuckDB file and loads one row with
`pipeline.run`: interpreter start, imports, configuration, the extract/normalize/load machinery,
the state and schema bookkeeping. Both this pipeline and the generic alternative pay it on every
run, so a run cannot be N times faster than another that takes less than N times this.

Run: `python -m bench.dltfloor --warehouse PATH --pipelines-dir DIR`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Load one row into a new DuckDB file with a default dlt pipeline."""
    parser = argparse.ArgumentParser(prog="python -m bench.dltfloor")
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--pipelines-dir", type=Path, required=True)
    args = parser.parse_args(argv)

    import dlt

    pipeline = dlt.pipeline(
        pipeline_name="bench_dlt_floor",
        destination=dlt.destinations.duckdb(str(args.warehouse)),
        dataset_name="floor",
        pipelines_dir=str(args.pipelines_dir),
    )
    pipeline.run([{"id": 1}], table_name="one_row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
