"""A local cluster's processes, read from ``/proc``: CPU time (where a benchmark's time went) and resident memory.

Every component of a ``LocalCluster`` leaves a pid file under the cluster's directory (kwokctl's etcd,
kube-apiserver, kube-controller-manager and kwok-controller; esi's processes and schedulers started with
``start_process``). Each reading is per component, named by its pid file; the difference of two CPU readings is
what each spent in between.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path

__all__ = ["cpu_seconds", "cpu_table", "rss_mib"]

_TICKS = os.sysconf("SC_CLK_TCK")


def _per_component(directory: Path, read: Callable[[int], float | None]) -> dict[str, float]:
    """Component name (its pid file's name) -> ``read(pid)``, for every live one under ``directory``."""
    found: dict[str, float] = {}
    for pid_file in sorted(directory.rglob("*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        value = read(pid)
        if value is not None:
            found[pid_file.stem] = found.get(pid_file.stem, 0.0) + value
    return found


def _process_seconds(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command (which may hold spaces, closed by the last ')'): state is field 3, utime 14, stime 15.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _process_mib(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return None if kib is None else kib / 1024


def cpu_seconds(directory: Path, *, with_benchmark: bool = False) -> dict[str, float]:
    """Component name -> CPU seconds it has used (user + system), for every live one under ``directory``; with
    ``with_benchmark``, also this process's as "benchmark" (it creates and follows objects on the same cores)."""
    found = _per_component(directory, _process_seconds)
    if with_benchmark:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        found["benchmark"] = usage.ru_utime + usage.ru_stime
    return found


def rss_mib(directory: Path) -> dict[str, float]:
    """Component name -> resident memory in MiB, for every live one under ``directory``."""
    return _per_component(directory, _process_mib)


def cpu_table(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    """Each component's CPU seconds between two readings, most first, with its share of ``wall`` seconds."""
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    lines = [
        f"    {name:<28} {seconds:6.2f} s cpu  ({seconds / wall:4.0%} of one core)"
        for name, seconds in sorted(spent.items(), key=lambda item: -item[1])
        if seconds >= 0.01
    ]
    total = sum(spent.values())
    lines.append(f"    {'all':<28} {total:6.2f} s cpu  ({total / wall:4.0%} of one core, {os.cpu_count()} cores)")
    return "\n".join(lines)
