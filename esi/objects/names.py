"""The names esi writes on Kubernetes objects (labels, annotations, priority classes, the second scheduler's name)
and how they read back: which pod is an executor, which slot a pod carries.

One place for them, because several components must agree: the BatchJob reconciler labels executor pod
templates, the Testbed reconciler labels ghost pods, the extender reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from esi.resources.meta import GROUP, ROLE_LABEL, PodRole

__all__ = [
    "ATTEMPT_ANNOTATION",
    "ATTEMPT_LABEL",
    "EXECUTOR_PRIORITY",
    "EXECUTOR_PRIORITY_CLASS",
    "GHOST_PRIORITY",
    "GHOST_PRIORITY_CLASS",
    "JOB_ANNOTATION",
    "JOB_LABEL",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "ROLE_EXECUTOR",
    "ROLE_GHOST",
    "ROLE_LABEL",
    "SCHEDULER_NAME",
    "SLOT_ANNOTATION",
    "TESTBED_ANNOTATION",
    "TESTBED_LABEL",
    "is_executor",
    "slot_of",
    "testbed_of",
]

TESTBED_LABEL: Final = f"{GROUP}/testbed"  # ghosts and executors: the Testbed's name
# ROLE_LABEL and its values (PodRole) are defined in esi.resources.meta, below the decisions that read roles.
ROLE_GHOST: Final = PodRole.GHOST.value
ROLE_EXECUTOR: Final = PodRole.EXECUTOR.value
JOB_LABEL: Final = f"{GROUP}/job"  # executors: the BatchJob they belong to
ATTEMPT_LABEL: Final = f"{GROUP}/attempt"  # executors: which attempt of the job in its Scheduling

# An application says which run it is in annotations, never in labels: the Spark operator copies an
# application's labels onto its driver and every executor, and a driver must not look like a Testbed's pod.
JOB_ANNOTATION: Final = JOB_LABEL
TESTBED_ANNOTATION: Final = TESTBED_LABEL
ATTEMPT_ANNOTATION: Final = ATTEMPT_LABEL
# Ghosts: the slot they hold; executors: the slot the extender gave them. An annotation, because the extender
# records it on the Binding that puts the executor on its node, and a Binding's annotations (not its labels)
# are copied onto the pod in the same write.
SLOT_ANNOTATION: Final = f"{GROUP}/slot"

# A recommended label (app.kubernetes.io), like ``esi.resources.meta.PART_OF_LABEL``.
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"  # applications and holds: esi made them (on pods too)
MANAGED_BY: Final = "esi"

SCHEDULER_NAME: Final = "esi-scheduler"

# Ghosts above ordinary workloads (priority 0), so ordinary pods can neither evict them nor take reserved
# capacity; executors above ghosts, so they can; both far below the system classes (2,000,000,000).
GHOST_PRIORITY_CLASS: Final = "esi-ghost"
GHOST_PRIORITY: Final = 1_000_000
EXECUTOR_PRIORITY_CLASS: Final = "esi-executor"
EXECUTOR_PRIORITY: Final = 2_000_000


def is_executor(labels: Mapping[str, str]) -> bool:
    """Whether a pod with these labels is one of esi's executors: a pod that goes into a Testbed's slot."""
    return labels.get(ROLE_LABEL) == ROLE_EXECUTOR


def slot_of(annotations: Mapping[str, str]) -> int | None:
    """The slot id a pod with these annotations carries (a ghost the slot it holds, an executor the slot it was
    given), or None."""
    value = annotations.get(SLOT_ANNOTATION, "")
    return int(value) if value.isascii() and value.isdigit() else None


def testbed_of(labels: Mapping[str, str]) -> str | None:
    """The Testbed a pod with these labels belongs to (its requests count as the Testbed's, not as other work on
    its node): a ghost's or an executor's; None for any other pod, whatever Testbed label it carries."""
    return labels.get(TESTBED_LABEL) if labels.get(ROLE_LABEL) in (ROLE_GHOST, ROLE_EXECUTOR) else None
