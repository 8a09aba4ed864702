"""What a pod's status says about its placement, read once for every component that asks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["scheduler_refusal"]


def scheduler_refusal(pod: Mapping[str, Any]) -> str | None:
    """Why the scheduler last refused a pod it has neither bound nor nominated a node for (its PodScheduled
    condition's message, else its reason); None when the pod is bound, nominated, finished or not refused.

    A nominated pod is on its way: the scheduler preempted room for it and tries again once that room is free.
    """
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending") or (pod.get("spec") or {}).get("nodeName"):
        return None
    if status.get("nominatedNodeName"):
        return None
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "no reason given")
    return None
