"""The kube-scheduler extender verbs: ``POST /extender/filter`` and ``POST /extender/preempt``.

Thin: parse the upstream wire format, ask the in-memory ``SlotIndex``, answer. A request that does not
parse is the caller's error: HTTP 400 naming each offending field, never a 500.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from esi.extender import ExtenderArgs, ExtenderPreemptionArgs
from esi.slot_index import SlotIndex

__all__ = ["router", "slot_index"]

router = APIRouter(prefix="/extender", tags=["extender"])
Request_ = TypeVar("Request_", bound=BaseModel)


def slot_index(request: Request) -> SlotIndex:
    index: SlotIndex = request.app.state.slot_index
    return index


Index = Annotated[SlotIndex, Depends(slot_index)]


async def _parse(request: Request, model: type[Request_]) -> Request_:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as err:
        problems = [
            {"field": ".".join(str(part) for part in e["loc"]) or "(body)", "problem": e["msg"]} for e in err.errors()
        ]
        fields = ", ".join(p["field"] for p in problems)
        raise HTTPException(
            status_code=400, detail={"message": f"not a valid {model.__name__}: {fields}", "errors": problems}
        ) from err


@router.post("/filter", summary="Allow only the node of the executor's slot")
async def filter_nodes(request: Request, index: Index) -> JSONResponse:
    args = await _parse(request, ExtenderArgs)
    return JSONResponse(index.filter(args).model_dump(mode="json"))


@router.post("/preempt", summary="Evict exactly the ghost pod of the executor's slot")
async def preempt(request: Request, index: Index) -> JSONResponse:
    args = await _parse(request, ExtenderPreemptionArgs)
    return JSONResponse(index.preempt(args).model_dump(mode="json"))
