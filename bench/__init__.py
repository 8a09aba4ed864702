"""Benchmarks: they print figures; nothing here asserts a time (see docs/performance.md, The benchmarks)."""
