"""The original ESI's example profiling scheduler, on esi's public client (docs/compatibility.md#profiling-scheduler).

- ``matrix`` — the co-location matrix kept in the jobs' ``externalScheduler`` data, and how a run becomes
  a sample of it (pure);
- ``plan`` — the slots a profiled pair gets and the scheduler's greedy queue (pure);
- ``runner`` — the Profiler and Scheduler loops, side by side (asyncio, the API only);
- ``python -m examples.profiling`` — the command line.
"""

__all__: list[str] = []
