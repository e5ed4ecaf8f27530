"""esper-warehouse's commands.

dlt's anonymous telemetry is switched off here, before any module of this package imports dlt,
so that no command sends anything beyond the Esper API wherever it runs (outside the project
folder there is no .dlt/config.toml to say so). An explicit `RUNTIME__DLTHUB_TELEMETRY` wins.
"""

import os

TELEMETRY_ENV = "RUNTIME__DLTHUB_TELEMETRY"
os.environ.setdefault(TELEMETRY_ENV, "false")
