"""The names esi writes on Kubernetes objects: labels, priority classes, the second scheduler's name.

One place for them, because several components must agree: the BatchJob reconciler labels executor pod
templates, the Testbed reconciler labels ghost pods, the extender reads both.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATTEMPT_LABEL",
    "EXECUTOR_PRIORITY",
    "EXECUTOR_PRIORITY_CLASS",
    "GHOST_PRIORITY",
    "GHOST_PRIORITY_CLASS",
    "JOB_LABEL",
    "ROLE_EXECUTOR",
    "ROLE_GHOST",
    "ROLE_LABEL",
    "SCHEDULER_NAME",
    "SLOT_LABEL",
    "TESTBED_LABEL",
]

_PREFIX: Final = "esi.tu-berlin.de"

TESTBED_LABEL: Final = f"{_PREFIX}/testbed"  # ghosts and executors: the Testbed's name
ROLE_LABEL: Final = f"{_PREFIX}/role"  # ROLE_GHOST or ROLE_EXECUTOR
ROLE_GHOST: Final = "ghost"
ROLE_EXECUTOR: Final = "executor"
JOB_LABEL: Final = f"{_PREFIX}/job"  # executors: the BatchJob they belong to
SLOT_LABEL: Final = f"{_PREFIX}/slot"  # ghosts: the slot they hold; executors: the slot the extender gave them
ATTEMPT_LABEL: Final = f"{_PREFIX}/attempt"  # applications and executors: which attempt of the job in its Scheduling

SCHEDULER_NAME: Final = "esi-scheduler"

# Ghosts above ordinary workloads (priority 0), so ordinary pods can neither evict them nor take reserved
# capacity; executors above ghosts, so they can; both far below the system classes (2,000,000,000).
GHOST_PRIORITY_CLASS: Final = "esi-ghost"
GHOST_PRIORITY: Final = 1_000_000
EXECUTOR_PRIORITY_CLASS: Final = "esi-executor"
EXECUTOR_PRIORITY: Final = 2_000_000
