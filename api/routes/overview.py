"""``GET /external/overview``: the Testbeds, BatchJobs and Schedulings of one namespace at a glance."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.dependencies import Cache, CheckedFirst, Namespace, may
from api.problems import refusals
from api.routes.answers import listing
from esi.wire.rest import Overview, overview

__all__ = ["router"]

router = APIRouter(prefix="/external", tags=["external scheduler API"], route_class=CheckedFirst)


@router.get(
    "/overview",
    summary="One namespace at a glance",
    response_model=Overview,
    dependencies=[may("list", "testbeds", "batchjobs", "schedulings")],
    responses=refusals(),
)
async def get_overview(cache: Cache, namespace: Namespace) -> Response:
    def render() -> bytes:
        view = overview(
            namespace,
            cache.testbeds.in_namespace(namespace),
            cache.jobs.in_namespace(namespace),
            cache.schedulings.in_namespace(namespace),
        )
        return view.model_dump_json().encode()

    return listing(cache, ("overview", namespace), render)
