"""Owner references: what makes the garbage collector remove an object esi creates together with its owner.

A *controller* owner manages its dependent (a Testbed its ghost pods, a BatchJob its application, an
application its pods) and a foreground deletion of it waits for the dependent to go (``blockOwnerDeletion``).
Any other owner (a Scheduling of its holds) only takes the dependent with it when it goes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["owner_reference"]


def owner_reference(api_version: str, kind: str, name: str, uid: str, *, controller: bool = True) -> dict[str, Any]:
    """The ``metadata.ownerReferences`` entry naming the owner ``kind`` ``name`` (``uid``) of ``api_version``."""
    reference: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
    if controller:
        reference["controller"] = True
    reference["blockOwnerDeletion"] = controller
    return reference
