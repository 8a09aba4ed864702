"""Writes the shells share: creating an object they keep, replacing a status decided on one view (deleting
exactly the pod that was seen, and binding, are the extender's: ``kube.pod_writes``).

They answer what the API server's refusal means for the decision that asked for the write: an object that
exists already is there; one refused because its namespace is being deleted is not wanted any more; a
status write over a newer version than the decision saw is a ``StaleView`` (decide again), not an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.types import PatchType

from kube.errors import Refusal, refusal

__all__ = ["StaleView", "create", "write_status"]


class StaleView(Exception):
    """A guarded status write found the object changed since the decision was made on it."""


async def write_status(
    client: AsyncClient,
    status_resource: Any,
    body: Mapping[str, Any],
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    guarded: bool = True,
) -> None:
    """Replace the object's whole status with ``new`` if it differs from ``old`` (a merge patch could not drop
    fields that went away). ``guarded``: only over the version decided on — a write decided on a stale view
    then raises ``StaleView`` (and the reconciler decides again) instead of undoing what happened meanwhile."""
    if new == old:
        return
    patch: list[dict[str, Any]] = [{"op": "add", "path": "/status", "value": dict(new)}]
    if guarded:
        patch.insert(
            0, {"op": "test", "path": "/metadata/resourceVersion", "value": body["metadata"]["resourceVersion"]}
        )
    name, namespace = body["metadata"]["name"], body["metadata"].get("namespace")
    try:
        await client.patch(status_resource, name, patch, namespace=namespace, patch_type=PatchType.JSON)
    except ApiError as err:
        if guarded and refusal(err) is Refusal.TEST_FAILED:
            raise StaleView(f"{name}: resourceVersion is no longer {body['metadata']['resourceVersion']}") from err
        raise


async def create(client: AsyncClient, manifest: Mapping[str, Any]) -> bool:
    """Create an object a reconciler keeps; one that exists already (409) is there. False when its namespace
    is being deleted: the API server refuses new objects there, and the owner goes with the namespace, so
    there is nothing left to decide (not a warning per ghost while a namespace empties)."""
    try:
        await client.create(from_dict(dict(manifest)))
    except ApiError as err:
        match refusal(err):
            case Refusal.CONFLICT:
                return True
            case Refusal.NAMESPACE_TERMINATING:
                return False
        raise
    return True
