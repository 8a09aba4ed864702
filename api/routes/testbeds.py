"""``GET /external/testbeds`` and ``GET /external/testbeds/{name}``: Testbeds and their slots, read-only
(the Testbed reconciler alone writes their status)."""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Response
from pydantic import TypeAdapter

from api.dependencies import Cache, Namespace, may
from api.problems import not_found, refusals
from esi.wire.rest import ExternalTestbed, external_testbed

__all__ = ["router"]

router = APIRouter(prefix="/external", tags=["external scheduler API"])

_TESTBEDS: Final = TypeAdapter(list[ExternalTestbed])


@router.get(
    "/testbeds",
    summary="All Testbeds",
    response_model=list[ExternalTestbed],
    dependencies=[may("list", "testbeds")],
    responses=refusals(),
)
async def list_testbeds(cache: Cache, namespace: Namespace) -> Response:
    def render() -> bytes:
        return _TESTBEDS.dump_json([external_testbed(t) for t in cache.testbeds.in_namespace(namespace)])

    return Response(cache.memo(("testbeds", namespace), render), media_type="application/json")


@router.get("/testbeds/{name}", summary="One Testbed", dependencies=[may("get", "testbeds")], responses=refusals(404))
async def get_testbed(name: str, cache: Cache, namespace: Namespace) -> ExternalTestbed:
    testbed = cache.testbeds.get(namespace, name)
    if testbed is None:
        raise not_found("Testbed", name, namespace)
    return external_testbed(testbed)
