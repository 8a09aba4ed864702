"""Benchmarks: they print figures; nothing here asserts a time (see README, Benchmarks)."""
