"""Reproducible benchmark scripts (run as modules: ``python -m benchmarks.log_store``)."""
