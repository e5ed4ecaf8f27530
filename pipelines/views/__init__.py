"""What a warehouse shows once loaded, and what `doctor` finds on a tenant: `status` and the
morning check (`morning`), what changed overnight (`digest`), the headline numbers (`headlines`),
the report and its offline pages (`report`, `offline`), the message after a run (`notify`), the
marts published to Postgres (`publish`) and the probe of a tenant's wire shapes (`doctor/`).

A layer of pipelines/ (tests/test_import_graph.py, `LAYERS`): above the run, below the jobs and
the command line. A view reads; it never runs the pipeline.
"""
