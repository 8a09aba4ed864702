"""``GET /external/testbeds`` and ``GET /external/testbeds/{name}``: Testbeds and their slots, read-only
(the Testbed reconciler alone writes their status)."""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Response
from pydantic import TypeAdapter

from api.dependencies import AskedView, Cache, CheckedFirst, Namespace, may
from api.problems import not_found, refusals
from api.routes.answers import listing, one
from esi.wire.rest import ExternalTestbed, OriginalTestbed, View, external_testbed

__all__ = ["router"]

router = APIRouter(prefix="/external", tags=["external scheduler API"], route_class=CheckedFirst)

_TESTBEDS: Final[dict[View, TypeAdapter[Any]]] = {
    View.ORIGINAL: TypeAdapter(list[OriginalTestbed]),
    View.ESI: TypeAdapter(list[ExternalTestbed]),
}


@router.get(
    "/testbeds",
    summary="All Testbeds",
    response_model=list[OriginalTestbed] | list[ExternalTestbed],
    dependencies=[may("list", "testbeds")],
    responses=refusals(),
)
async def list_testbeds(cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    def render() -> bytes:
        return bytes(_TESTBEDS[view].dump_json([external_testbed(t) for t in cache.testbeds.in_namespace(namespace)]))

    return listing(cache, ("testbeds", namespace, view), render)


@router.get(
    "/testbeds/{name}",
    summary="One Testbed",
    response_model=OriginalTestbed | ExternalTestbed,
    dependencies=[may("get", "testbeds")],
    responses=refusals(404),
)
async def get_testbed(name: str, cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    testbed = cache.testbeds.get(namespace, name)
    if testbed is None:
        raise not_found("Testbed", name, namespace)
    return one(external_testbed(testbed), view)
