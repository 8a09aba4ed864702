"""Holds: how a Scheduling takes its Testbed and its BatchJobs exclusively.

A hold is a ``coordination.k8s.io/v1`` Lease in the held object's namespace, named after what it holds
(``testbed.<name>``, ``batchjob.<name>``), its holder identity the Scheduling's name, and owned by that
Scheduling. Holds rest on what the API server already guarantees (docs/design.md#holds; why not spec
fields: docs/compatibility.md#holds):

* Taking a hold is *create*: of two Schedulings creating the same Lease, exactly one succeeds (the other
  gets 409 Conflict) — no read-modify-write of someone else's object, no spec field a user or GitOps owns.
* All or nothing: the Scheduling reconciler creates every Lease it lacks and, if any is held by another
  Scheduling, deletes the ones it created in that attempt before waiting.
* Self-releasing: the Scheduling's finalizer deletes its holds; and since they are owned by the
  Scheduling, the garbage collector removes them too if the Scheduling goes without its finalizer.

Pure: manifests in, manifests out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from esi.objects.names import MANAGED_BY, MANAGED_BY_LABEL
from esi.objects.owners import owner_reference
from esi.resources.meta import API_VERSION, GROUP

__all__ = ["HOLDER_UID_LABEL", "HOLD_KIND_LABEL", "Hold", "HoldKind", "hold_manifest", "hold_name", "read_hold"]

HOLD_KIND_LABEL: Final = f"{GROUP}/hold-of"  # testbed | batchjob: marks esi's Leases
HOLDER_UID_LABEL: Final = f"{GROUP}/holder-uid"  # the holding Scheduling's UID (to find its holds)
HELD_ANNOTATION: Final = f"{GROUP}/held"  # the held object's name (a name may exceed a label value)
_MAX_NAME = 253


class HoldKind(StrEnum):
    TESTBED = "testbed"
    BATCHJOB = "batchjob"


@dataclass(frozen=True)
class Hold:
    """Who holds what: ``scheduling`` (name and UID) holds the ``kind`` object ``held``."""

    kind: HoldKind
    held: str
    scheduling: str
    scheduling_uid: str


def hold_name(kind: HoldKind, held: str) -> str:
    """The Lease's name: ``<kind>.<held>``; names too long for that end in a digest instead."""
    name = f"{kind.value}.{held}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(held.encode()).hexdigest()[:16]
    return f"{name[: _MAX_NAME - 17]}.{digest}"


def hold_manifest(kind: HoldKind, held: str, *, namespace: str, scheduling: str, scheduling_uid: str) -> dict[str, Any]:
    """The Lease by which Scheduling ``scheduling`` holds ``held``."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": hold_name(kind, held),
            "namespace": namespace,
            "labels": {
                HOLD_KIND_LABEL: kind.value,
                HOLDER_UID_LABEL: scheduling_uid,
                MANAGED_BY_LABEL: MANAGED_BY,
            },
            "annotations": {HELD_ANNOTATION: held},
            "ownerReferences": [
                owner_reference(API_VERSION, "Scheduling", scheduling, scheduling_uid, controller=False)
            ],
        },
        "spec": {"holderIdentity": scheduling},
    }


def read_hold(lease: Mapping[str, Any]) -> Hold | None:
    """The hold a Lease records, or None when it is not one of esi's (or is incomplete)."""
    metadata = lease.get("metadata") or {}
    labels = metadata.get("labels") or {}
    try:
        kind = HoldKind(labels.get(HOLD_KIND_LABEL, ""))
    except ValueError:
        return None
    held = (metadata.get("annotations") or {}).get(HELD_ANNOTATION)
    scheduling = (lease.get("spec") or {}).get("holderIdentity")
    uid = labels.get(HOLDER_UID_LABEL)
    if not held or not scheduling or not uid:
        return None
    return Hold(kind, held, scheduling, uid)
