"""What puts runs, builds and views together: many tenants (`tenants`: `tenants.toml`, one
warehouse file each and the fleet file), the demo (`demo`) and Dagster's definitions
(`dagster_defs`).

A layer of pipelines/ (tests/test_import_graph.py, `LAYERS`): above the views, below the command
line.
"""
