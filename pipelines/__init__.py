"""esper-warehouse's commands, and the library they call, in layers (bottom first; a module
imports its own layer or one below, tests/test_import_graph.py's `PIPELINE_LAYERS`):

- the ground, modules every layer shares: `exit_codes.py`, `readable.py` (how a value reads),
  `warehouse.py` (the file and its lock), `bookkeeping.py` (the pipeline's own tables),
  `extras.py` (the optional parts of the install), and this package;
- `shapes/`: an Esper answer against the recorded shapes (doctor's and the tests');
- `build/`: the SQL models, the raw tables they read, their data tests, the change log;
- `run/`: one run: extract, load, reconcile, record, then the build;
- `views/`: what a warehouse shows (`status`, `report`, the notification, `publish`), and
  `doctor`'s probe of a tenant;
- `jobs/`: many tenants, the demo, Dagster's definitions;
- `commands/`: one module per subcommand; `cli.py`: `esper-warehouse`;
- `tools/` on top: the developers' `python -m` commands (the documents' generators, which may
  run the command line, and `local_postgres`).

Imported as `esper_warehouse.pipelines`: in a checkout `esper_warehouse/__init__.py` adds the
repository's root to that package's search path, so `esper_warehouse.pipelines.views.status` is
the file `pipelines/views/status.py` (docs/decisions.md, "Layers for pipelines/").

dlt's anonymous telemetry is switched off here, before any module of this package imports dlt,
so that no command sends anything beyond the Esper API wherever it runs (outside the project
folder there is no .dlt/config.toml to say so). An explicit `RUNTIME__DLTHUB_TELEMETRY` wins.
"""

import os

TELEMETRY_ENV = "RUNTIME__DLTHUB_TELEMETRY"
os.environ.setdefault(TELEMETRY_ENV, "false")
