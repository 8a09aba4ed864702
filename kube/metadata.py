"""Listing objects by their metadata only: the API server sends each as a ``PartialObjectMetadata`` (its
``metadata``, no spec or status), so a reader of names, labels and times of many objects — retention reading
100,000 Runs — neither receives nor decodes the rest.

lightkube has no option for it; the request is lightkube's own list, sent with the ``Accept`` header that asks
for a ``PartialObjectMetadataList``, and each item comes back as an object of the listed kind holding only
``metadata``.
"""

from __future__ import annotations

from typing import Any, Final

from lightkube import ALL_NS, AsyncClient
from lightkube.core.generic_client import ListAsyncIterable

from kube.watch import LIST_CHUNK

__all__ = ["list_metadata"]

_METADATA_ONLY: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def list_metadata(client: AsyncClient, resource: Any, *, namespace: str = ALL_NS) -> ListAsyncIterable[Any]:
    """Every object of ``resource`` (of every namespace, or of ``namespace``), its ``metadata`` only, in chunks of
    ``LIST_CHUNK``."""
    http = client._client  # lightkube's list, with a header its public list does not take
    request = http.prepare_request(
        "list", res=resource, namespace=namespace, params={"limit": LIST_CHUNK}, headers={"Accept": _METADATA_ONLY}
    )
    return http.list(request)
