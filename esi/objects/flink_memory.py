"""Flink's memory model: whether a JobManager or TaskManager of a given process size can start, and why not.

The Flink operator sets ``jobmanager.memory.process.size`` / ``taskmanager.memory.process.size`` from a
FlinkDeployment's ``resource.memory``; Flink then splits that size into its memory components and refuses to
start a process whose components do not fit — only at run time, after the pods were made. esi sizes each
TaskManager to its slot, so it checks the split first, the way Flink derives it from a process size
(``TaskExecutorProcessUtils`` / ``JobManagerProcessUtils``, Flink 2.x, checked against Flink's own
``BashJavaUtils`` by tests/integration/test_flink_memory.py):

TaskManager, process size *P*:
  overhead *O* = *P* x ``jvm-overhead.fraction`` within [``jvm-overhead.min``, ``jvm-overhead.max``];
  Flink memory *F* = *P* - ``jvm-metaspace.size`` - *O*;
  managed = ``managed.size``, else *F* x ``managed.fraction``;
  network = *F* x ``network.fraction`` within [``network.min``, ``network.max``];
  task heap = *F* - ``framework.heap.size`` - ``framework.off-heap.size`` - ``task.off-heap.size`` - managed
  - network, which must not be negative.
JobManager, process size *P*: *O* and *F* as above (its own keys), JVM heap = *F* - ``off-heap.size``, which
must be positive.

Defaults are Flink's (all under ``taskmanager.memory.`` / ``jobmanager.memory.``). Settings that size a
component in another way (``flink.size``, ``task.heap.size``, ``heap.size``) are not modelled: esi sizes the
process, and ``unmodelled_memory_keys`` names them so that the caller can refuse them.

Fitting a TaskManager to its slot (``fitted_task_manager``): with Flink's defaults a TaskManager needs 982 MiB,
because managed memory takes 40% of its Flink memory whatever is left for the task heap (at 982 MiB, nothing).
Where the user left managed memory at Flink's default (neither ``managed.size`` nor ``managed.fraction``), esi
sets ``managed.size`` so that the task heap keeps 64 MiB — or, in smaller slots, 60% (the default's share) of
what the fixed parts (framework heap and off-heap, task off-heap) and the network memory leave — whenever
Flink's own split would leave it less (below about 1,088 MiB). Metaspace, JVM overhead and network memory keep
Flink's values: the JVM and a batch job's shuffle need them whatever the slot. With Flink's defaults that
starts down to 771 MiB (a MiB each of task heap and managed memory); what the user's own settings make
impossible is refused, naming them.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "MemoryConfigError",
    "TaskManagerMemory",
    "fitted_task_manager",
    "job_manager_heap",
    "memory_size",
    "smallest_task_manager",
    "task_manager_memory",
    "unmodelled_memory_keys",
    "user_memory_settings",
]

MIB: Final = 2**20
_UNITS: Final = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "k": 2**10,
    "kb": 2**10,
    "kibibytes": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "mebibytes": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gibibytes": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "tebibytes": 2**40,
}
_SIZE: Final = re.compile(r"\s*(\d+)\s*([a-zA-Z]*)\s*")
_UNLIMITED: Final = 2**63 - 1
# The task heap esi leaves a fitted TaskManager where its slot has room for it (Flink's defaults leave a 982 MiB
# TaskManager none: it starts, and its tasks have no heap); in smaller slots, the default share of what is left.
_TASK_HEAP_FLOOR: Final = 64 * MIB

_TM: Final = "taskmanager.memory."
_JM: Final = "jobmanager.memory."
_TM_DEFAULTS: Final = {
    "framework.heap.size": "128m",
    "framework.off-heap.size": "128m",
    "task.off-heap.size": "0",
    "managed.fraction": "0.4",
    "network.min": "64m",
    "network.max": str(_UNLIMITED),
    "network.fraction": "0.1",
    "jvm-metaspace.size": "256m",
    "jvm-overhead.min": "192m",
    "jvm-overhead.max": "1g",
    "jvm-overhead.fraction": "0.1",
}
_JM_DEFAULTS: Final = {
    "off-heap.size": "128m",
    "jvm-metaspace.size": "256m",
    "jvm-overhead.min": "192m",
    "jvm-overhead.max": "1g",
    "jvm-overhead.fraction": "0.1",
}
_UNMODELLED: Final = (
    _TM + "flink.size",
    _TM + "task.heap.size",
    _TM + "process.size",
    _JM + "flink.size",
    _JM + "heap.size",
    _JM + "process.size",
)


class MemoryConfigError(ValueError):
    """A memory setting Flink cannot read, or a process size whose components do not fit; says which."""


def memory_size(text: object, key: str) -> int:
    """Bytes of a Flink MemorySize (``"1024m"``, ``"1g"``, ``"512 mb"``; no unit is bytes)."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise MemoryConfigError(f'"{key}" is {text!r}, not a memory size Flink reads (e.g. "256m", "1g")')
    return int(match.group(1)) * _UNITS[unit]


def _fraction(text: object, key: str) -> Decimal:
    """A fraction as Flink reads it: a 32-bit float, multiplied exactly in decimal (``MemorySize.multiply``)."""
    try:
        value = float(str(text))
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise MemoryConfigError(f'"{key}" is {text!r}, not a fraction in [0, 1)')
    return Decimal(repr(struct.unpack("f", struct.pack("f", value))[0]))


class _Settings:
    def __init__(self, conf: Mapping[str, Any], prefix: str, defaults: Mapping[str, str]) -> None:
        self.conf, self.prefix, self.defaults = conf, prefix, defaults

    def size(self, name: str) -> int:
        key = self.prefix + name
        return memory_size(self.conf.get(key, self.defaults.get(name)), key)

    def fraction(self, name: str) -> Decimal:
        key = self.prefix + name
        return _fraction(self.conf.get(key, self.defaults[name]), key)

    def capped(self, total: int, name: str) -> int:
        """``total`` x the ``<name>.fraction`` within ``<name>.min`` and ``<name>.max``."""
        low, high = self.size(name + ".min"), self.size(name + ".max")
        if low > high:
            raise MemoryConfigError(f'"{self.prefix}{name}.min" is larger than "{self.prefix}{name}.max"')
        return min(max(int(total * self.fraction(name + ".fraction")), low), high)

    def flink_memory(self, process: int, what: str) -> int:
        metaspace = self.size("jvm-metaspace.size")
        overhead = self.capped(process, "jvm-overhead")
        flink = process - metaspace - overhead
        if flink < 0:
            raise MemoryConfigError(
                f"a {what} of {_mib(process)} cannot start: JVM metaspace {_mib(metaspace)} and JVM overhead "
                f"{_mib(overhead)} leave no room for Flink's memory"
            )
        return flink


@dataclass(frozen=True)
class TaskManagerMemory:
    """How Flink splits a TaskManager's process memory (bytes), and the settings it takes to split it so
    (``settings``: what esi adds to the user's configuration; none where Flink's own split fits)."""

    process: int
    flink: int
    task_heap: int
    managed: int
    network: int
    settings: Mapping[str, str] = field(default_factory=dict)


def unmodelled_memory_keys(conf: Mapping[str, Any]) -> list[str]:
    """The keys of ``conf`` that size a JobManager or TaskManager in a way this model does not follow."""
    return [key for key in _UNMODELLED if key in conf]


def task_manager_memory(process: int, conf: Mapping[str, Any]) -> TaskManagerMemory:
    """The split of a TaskManager of ``process`` bytes under ``conf``; ``MemoryConfigError`` when it cannot start."""
    settings = _Settings(conf, _TM, _TM_DEFAULTS)
    flink = settings.flink_memory(process, "TaskManager")
    if _TM + "managed.size" in conf:
        managed = settings.size("managed.size")
    else:
        managed = int(flink * settings.fraction("managed.fraction"))
    network = settings.capped(flink, "network")
    fixed = {
        "framework heap": settings.size("framework.heap.size"),
        "framework off-heap": settings.size("framework.off-heap.size"),
        "task off-heap": settings.size("task.off-heap.size"),
        "managed": managed,
        "network": network,
    }
    task_heap = flink - sum(fixed.values())
    if task_heap < 0:
        parts = ", ".join(f"{name} {_mib(size)}" for name, size in fixed.items())
        raise MemoryConfigError(
            f"a TaskManager of {_mib(process)} cannot start: of its Flink memory ({_mib(flink)}, after JVM "
            f"metaspace and overhead), {parts} leave no task heap"
        )
    return TaskManagerMemory(process=process, flink=flink, task_heap=task_heap, managed=managed, network=network)


def user_memory_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The TaskManager memory settings of ``conf``: the user's own, which esi never changes."""
    return {key: value for key, value in conf.items() if key.startswith(_TM)}


def fitted_task_manager(process: int, conf: Mapping[str, Any]) -> TaskManagerMemory:
    """The split of a TaskManager of ``process`` bytes under ``conf``, with the managed memory esi sets where the
    user left it at Flink's default (see the module docstring); ``MemoryConfigError`` when it cannot start."""
    if _TM + "managed.size" in conf or _TM + "managed.fraction" in conf:
        return task_manager_memory(process, conf)  # the user's own managed memory, theirs to lower
    settings = _Settings(conf, _TM, _TM_DEFAULTS)
    flink = settings.flink_memory(process, "TaskManager")
    fixed = sum(
        settings.size(name) for name in ("framework.heap.size", "framework.off-heap.size", "task.off-heap.size")
    )
    left = flink - fixed - settings.capped(flink, "network")  # for the task heap and managed memory
    fraction = settings.fraction("managed.fraction")
    default = int(flink * fraction)
    floor = min(_TASK_HEAP_FLOOR, int(left * (1 - fraction)))
    if left - floor >= default:
        return task_manager_memory(process, conf)  # Flink's own split leaves the task heap its floor
    managed = (left - floor) // MIB * MIB  # whole MiB: a setting people read
    if managed < MIB or left - managed < MIB:
        raise MemoryConfigError(
            f"a TaskManager of {_mib(process)} cannot start: its Flink memory ({_mib(flink)}, after JVM metaspace and "
            f"overhead) leaves {_mib(max(left, 0))} beside its framework, task off-heap and network memory, too "
            "little for a managed memory and a task heap of a MiB each"
        )
    fitted = {_TM + "managed.size": f"{managed // MIB}m"}
    split = task_manager_memory(process, {**conf, **fitted})
    return TaskManagerMemory(split.process, split.flink, split.task_heap, split.managed, split.network, fitted)


def smallest_task_manager(conf: Mapping[str, Any]) -> int:
    """The smallest TaskManager process size in whole MiB (bytes) that can start under ``conf``, fitted."""
    low, high = MIB, 64 * 2**30
    fitted_task_manager(high, conf)  # raises when even that cannot start
    while high - low > MIB:
        middle = (low + high) // 2 // MIB * MIB
        try:
            fitted_task_manager(middle, conf)
        except MemoryConfigError:
            low = middle
        else:
            high = middle
    return high


def job_manager_heap(process: int, conf: Mapping[str, Any]) -> int:
    """The JVM heap of a JobManager of ``process`` bytes under ``conf``; ``MemoryConfigError`` when it cannot start."""
    settings = _Settings(conf, _JM, _JM_DEFAULTS)
    flink = settings.flink_memory(process, "JobManager")
    off_heap = settings.size("off-heap.size")
    if flink <= off_heap:
        raise MemoryConfigError(
            f"a JobManager of {_mib(process)} cannot start: its Flink memory ({_mib(flink)}, after JVM metaspace "
            f"and overhead) leaves no JVM heap beside its off-heap memory ({_mib(off_heap)})"
        )
    return flink - off_heap


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB" if size % MIB else f"{size // MIB} MiB"
