"""Benchmarks: this pipeline against the I/O floor, the DuckDB floor and dlt's generic `rest_api`.

Run with `make bench` (every fleet size) or `make bench-quick` (2,000 devices only); both then
measure the model build on the synthetic 150,000-device warehouse (`bench/modelbuild.py`), rewrite
`bench/README.md` and write raw JSON results into `bench/results/`.
"""
