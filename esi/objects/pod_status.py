"""What a pod's status says about its placement, read once for every component that asks."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["last_container_end", "scheduler_refusal"]


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


def last_container_end(status: Mapping[str, Any] | None) -> datetime | None:
    """When the last of a pod's containers (init containers too) ended, from its status; None if none has."""
    ends = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in (status or {}).get(key) or ():
            finished = ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")
            if isinstance(finished, datetime):
                ends.append(finished)
            elif isinstance(finished, str):
                try:
                    ends.append(datetime.fromisoformat(finished))
                except ValueError:
                    continue
    return max(ends, default=None)
