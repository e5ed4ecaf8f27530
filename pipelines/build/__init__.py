"""The SQL build: the models (seeds -> staging -> intermediate -> marts) built in a DuckDB
warehouse, the raw tables they may read (`raw_contract`), their files (`model_files`), their data
tests (`datatests`) and the change log kept across nights (`change_log`).

A layer of pipelines/ (tests/test_import_graph.py, `LAYERS`): above the ground modules, below the
run that builds after it loads.
"""
