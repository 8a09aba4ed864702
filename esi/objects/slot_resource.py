"""The extended resource a Testbed's slots are counted in when esi's scheduler is a profile of the cluster's own
kube-scheduler (docs/design.md#one-scheduler-for-both).

Executors (and ghosts) request one slot each, the Testbed's nodes advertise ``slotsPerNode`` of it, and the
extender declares it in ``managedResources``: kube-scheduler then asks the extender about these pods only
(``HTTPExtender.IsInterested``: a pod whose containers request or limit a managed resource), and binds every
other pod of every profile itself. A kubelet refuses a pod beyond its node's slots.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from esi.resources.meta import GROUP

__all__ = ["SLOT_RESOURCE", "advertised_slots", "requesting_a_slot"]

SLOT_RESOURCE: Final = f"{GROUP}/slot"


def requesting_a_slot(resources: Mapping[str, Any]) -> dict[str, Any]:
    """A container's ``resources`` with one slot added to its requests and its limits (an extended resource's
    request must equal its limit)."""
    one = {SLOT_RESOURCE: "1"}
    return {
        **resources,
        "requests": {**(resources.get("requests") or {}), **one},
        "limits": {**(resources.get("limits") or {}), **one},
    }


def advertised_slots(slots_per_node: int) -> dict[str, Any]:
    """The merge patch of a node's status that advertises its slots, in its capacity and its allocatable."""
    slots = {SLOT_RESOURCE: str(slots_per_node)}
    return {"status": {"capacity": slots, "allocatable": slots}}
