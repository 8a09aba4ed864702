"""Writes the shells share: creating an object they keep, replacing a status decided on one view, deleting
exactly the object that was seen.

They answer what the API server's refusal means for the decision that asked for the write: an object that
exists already is there; one refused because its namespace is being deleted is not wanted any more; a
status write over a newer version than the decision saw is a ``StaleView`` (decide again), not an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.core.resource import NamespacedResource
from lightkube.models.meta_v1 import DeleteOptions, Preconditions
from lightkube.types import PatchType

from kube.errors import Refusal, refusal

__all__ = ["StaleView", "create", "delete_exactly", "write_status"]


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


async def delete_exactly(
    client: AsyncClient, resource: type[NamespacedResource], name: str, namespace: str, *, uid: str | None
) -> None:
    """Delete ``name`` at once (no grace period), only if it is still the object ``uid`` (when given): one made
    since under the same name is left alone (``ApiError`` CONFLICT), one already gone is NOT_FOUND.

    The UID precondition travels in the DELETE's body, which lightkube's ``delete`` does not send: this is its
    own request with the body added. (An eviction carries the same options, but the API server first writes
    a ``DisruptionTarget`` condition onto the pod and lists its PodDisruptionBudgets — a second write and
    watch event per deletion.)"""
    generic = client._client  # lightkube's request builder; its public delete takes no body
    request = generic.prepare_request("delete", resource, name=name, namespace=namespace)
    request.data = DeleteOptions(
        apiVersion="v1",
        kind="DeleteOptions",
        gracePeriodSeconds=0,
        preconditions=Preconditions(uid=uid) if uid else None,
    )
    response = await generic.send(generic.build_adapter_request(request))  # type: ignore[no-untyped-call]
    generic.handle_response("delete", response, request)
