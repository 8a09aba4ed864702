"""The kube-scheduler extender verbs: ``POST /extender/filter``, ``/extender/bind`` and ``/extender/preempt``.

Thin: parse the upstream wire format, ask the in-memory ``SlotIndex``, answer. A request that does not
parse is the caller's error: HTTP 400 naming each offending field, never a 500.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Final, TypeVar

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from api.extender.binder import SlotBinder
from api.extender.slot_index import SlotIndex, pod_key
from api.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    SchedulingPod,
)
from esi.objects.names import is_executor
from esi.wire.rest import ApiError, ErrorBody, field_problems

__all__ = ["BindingRecorder", "describe", "router", "slot_index"]

# Records (namespace, pod name, slot id) on the pod; set on app.state by whoever holds a Kubernetes client.
BindingRecorder = Callable[[str, str, int], Coroutine[Any, Any, None]]

log = logging.getLogger(__name__)
router = APIRouter(prefix="/extender", tags=["extender"])
Request_ = TypeVar("Request_", bound=BaseModel)


_REF: Final = "#/components/schemas/{model}"


def describe(app: FastAPI) -> None:
    """Have ``app``'s OpenAPI description hold the schemas of the verbs' bodies."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            described = plain()
            _, schemas = models_json_schema([(m, "validation") for m in _ARGUMENTS], ref_template=_REF)
            described.setdefault("components", {}).setdefault("schemas", {}).update(schemas.get("$defs", {}))
            app.openapi_schema = described
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


async def slot_index(request: Request) -> SlotIndex:
    index: SlotIndex = request.app.state.slot_index
    return index


Index = Annotated[SlotIndex, Depends(slot_index)]


async def _parse(request: Request, model: type[Request_]) -> Request_:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as err:
        problems = field_problems(err)
        fields = ", ".join(p.field for p in problems)
        message = f"not a valid {model.__name__}: {fields}"
        raise HTTPException(status_code=400, detail=ApiError(message=message, errors=problems).model_dump()) from err


async def _record_new_binding(request: Request, index: SlotIndex, pod: SchedulingPod) -> None:
    """Record a pod's new slot on the pod before a preemption evicts the slot's ghost, or the Testbed would put
    the ghost back (the bind verb records it on the Binding instead)."""
    binding = index.take_unrecorded(pod_key(pod))
    recorder: BindingRecorder | None = getattr(request.app.state, "binding_recorder", None)
    if binding is not None and recorder is not None:
        await recorder(*binding)


def _record_ghostless_binding(request: Request, index: SlotIndex, pod: SchedulingPod) -> None:
    """Start recording a pod's new slot that has no ghost to evict: no preemption comes for it, and a scheduler
    without the bind verb binds it by itself. Not waited for: the filter runs in the scheduler's cycle."""
    binding = index.take_unrecorded(pod_key(pod), ghostless=True)
    recorder: BindingRecorder | None = getattr(request.app.state, "binding_recorder", None)
    if binding is not None and recorder is not None:
        writes: set[asyncio.Task[None]] = request.app.state.recordings
        task = asyncio.create_task(recorder(*binding))
        writes.add(task)
        task.add_done_callback(writes.discard)


def _name(pod: SchedulingPod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


_ARGUMENTS: Final = (ExtenderArgs, ExtenderPreemptionArgs, ExtenderBindingArgs)


def _verb(arguments: type[BaseModel], answer: type[BaseModel]) -> dict[str, Any]:
    """A verb's OpenAPI description: its body (parsed by ``_parse``, so FastAPI does not know it: ``describe``
    adds its schema) and its answers."""
    body = {"$ref": _REF.format(model=arguments.__name__)}
    return {
        "openapi_extra": {"requestBody": {"required": True, "content": {"application/json": {"schema": body}}}},
        "response_model": answer,
        "responses": {400: {"model": ErrorBody, "description": "The body does not fit; `errors` names each field"}},
    }


@router.post(
    "/filter", summary="Allow only the node of the executor's slot", **_verb(ExtenderArgs, ExtenderFilterResult)
)
async def filter_nodes(request: Request, index: Index) -> JSONResponse:
    args = await _parse(request, ExtenderArgs)
    answer = index.filter(args)
    _record_ghostless_binding(request, index, args.pod)
    if is_executor(args.pod.metadata.labels):  # one line per decision about an executor: what placed it, or why not
        log.info("filter %s: %s", _name(args.pod), answer.error or f"node {answer.node_names}")
    return JSONResponse(answer.model_dump(mode="json"))


@router.post(
    "/bind",
    summary="Bind the pod: an executor into its slot, in place of the slot's ghost",
    **_verb(ExtenderBindingArgs, ExtenderBindingResult),
)
async def bind(request: Request) -> JSONResponse:
    args = await _parse(request, ExtenderBindingArgs)
    binder: SlotBinder | None = getattr(request.app.state, "binder", None)
    if binder is None:
        answer = ExtenderBindingResult(error="the extender does not follow a cluster, so it binds nothing")
    else:
        answer = await binder.bind(args)
    if answer.error:
        log.info("bind %s/%s to %s: %s", args.pod_namespace, args.pod_name, args.node, answer.error)
    return JSONResponse(answer.model_dump(mode="json"))


@router.post(
    "/preempt",
    summary="Evict exactly the ghost pod of the executor's slot",
    **_verb(ExtenderPreemptionArgs, ExtenderPreemptionResult),
)
async def preempt(request: Request, index: Index) -> JSONResponse:
    args = await _parse(request, ExtenderPreemptionArgs)
    answer = index.preempt(args)
    await _record_new_binding(request, index, args.pod)
    if is_executor(args.pod.metadata.labels):
        victims = {node: [p.uid for p in v.pods] for node, v in answer.node_name_to_meta_victims.items()}
        log.info("preempt %s: victims %s (candidates %s)", _name(args.pod), victims, args.candidate_nodes())
    return JSONResponse(answer.model_dump(mode="json"))
