"""Benchmarks: what lineage costs, how fast the pipeline runs. `make bench` (or `python -m bench.run`)."""
