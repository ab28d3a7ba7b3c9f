"""Benchmarks for memory-ledger: run `python -m benchmarks.bench_core` from the repo root."""
