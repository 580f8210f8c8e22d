"""Benchmarks: `make bench` runs bench.run_all, which writes bench/results/*.json and SUMMARY.md."""
