"""The developers' commands, run as `python -m esper_warehouse.pipelines.tools.<name>`: the
documents' generated sections (`table_docs` and the other `*_docs` modules) and a local
PostgreSQL (`local_postgres`).

The top layer of pipelines/ (tests/test_import_graph.py, `LAYERS`): a generator may read any
layer below, the command line included; nothing imports a tool but another tool.
"""
