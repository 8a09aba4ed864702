"""How a route answers with Testbeds, BatchJobs and Schedulings: JSON already rendered in the view asked for
(``esi.wire.rest.View``), sent as it is rather than validated again by FastAPI."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from fastapi import Response, status

from api.cache import ResourceCache
from esi.wire.rest import ExternalBatchJob, ExternalScheduling, ExternalTestbed, View, view_json

__all__ = ["listing", "one"]


def one(
    resource: ExternalTestbed | ExternalBatchJob | ExternalScheduling, view: View, status_code: int = status.HTTP_200_OK
) -> Response:
    """One object's view."""
    return Response(view_json(resource, view), status_code, media_type="application/json")


def listing(cache: ResourceCache, key: Hashable, render: Callable[[], bytes]) -> Response:
    """An answer rendered once per state of the cache (``key`` names it: what, which namespace, which view)."""
    return Response(cache.memo(key, render), media_type="application/json")
