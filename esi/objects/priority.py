"""The two PriorityClasses esi installs: ghost pods above ordinary workloads, executors above ghosts.

Ordinary pods (priority 0) can therefore neither evict a ghost nor take the capacity it holds; an executor
can evict a ghost (which the extender turns into: exactly its slot's ghost). Ghosts never preempt anything
themselves. Both stay far below the system classes.
"""

from __future__ import annotations

from typing import Any

from esi.objects.names import (
    EXECUTOR_PRIORITY,
    EXECUTOR_PRIORITY_CLASS,
    GHOST_PRIORITY,
    GHOST_PRIORITY_CLASS,
)
from esi.resources.meta import part_of_esi

__all__ = ["priority_classes"]

SYSTEM_PRIORITY_FLOOR = 1_000_000_000  # system-cluster-critical and system-node-critical are above this


def priority_classes() -> list[dict[str, Any]]:
    """PriorityClass manifests (scheduling.k8s.io/v1) for ghost and executor pods."""
    assert 0 < GHOST_PRIORITY < EXECUTOR_PRIORITY < SYSTEM_PRIORITY_FLOOR
    return [
        _priority_class(
            GHOST_PRIORITY_CLASS,
            GHOST_PRIORITY,
            "Never",
            "esi ghost pods: hold a Testbed slot's capacity; never preempt anything",
        ),
        _priority_class(
            EXECUTOR_PRIORITY_CLASS,
            EXECUTOR_PRIORITY,
            "PreemptLowerPriority",
            "esi executor pods: take their slot by evicting its ghost pod",
        ),
    ]


def _priority_class(name: str, value: int, preemption: str, description: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": part_of_esi()},
        "value": value,
        "preemptionPolicy": preemption,
        "globalDefault": False,
        "description": description,
    }
