"""One run of the nightly job (`esper-warehouse run`, the demo's nights, Dagster's tenants).

`runner.py` holds the run and its part loop; the rest sits here in the order a run passes
through it:

- `types.py`: what a run is given (`RunSettings`) and what it returns (`RunResult`);
- `pipeline.py`: dlt's settings, the pipeline beside the warehouse, the settings checked first;
- `held.py`: the DuckDB connection a run holds, and the load's memory limit;
- `ownership.py`: a dataset belongs to one pipeline name;
- `dispositions.py`: the resources selected, merge or append, the note of appends;
- `progress.py`: the progress line while extracting;
- `clock.py`: the run's "now", unless the API's data and this machine's clock contradict it;
- `interrupts.py`: Ctrl-C and SIGTERM;
- `reconcile.py`: every complete list checked against the API's count after the load;
- `record.py`: after the load, the run's record, the models and the summary;
- `failures.py`: what a failed run means (its exit code, its text).

The run's own tables (`_esper_runs`, `_esper_reconciliation`, `_esper_rejected`) are declared and
written by `pipelines/bookkeeping.py`, in the ground layer: the build and `status` read them too.
Nothing is imported here. Many tenants (`jobs/tenants.py`) and the command's options
(`commands/run.py`) sit in the layers above: they call `runner.run`.
"""
