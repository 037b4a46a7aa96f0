"""Benchmark commands (`python -m benchmarks.placement …`, BENCHMARKS.md); not in the installed package."""
