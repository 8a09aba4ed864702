"""The external scheduler API under ``/external``: the original's routes and JSON shapes, with its defects fixed.

Reads come from the watch cache (``api.cache``), writes go to the API server and their answer is put into the
cache at once. Every route needs a bearer token; what the caller may do is decided per namespace and
resource (``api.auth``). Refusals have one shape (``api.problems``): 404 for what does not exist (also on
DELETE, where the original answered 304), 409 for conflicts, 422 with field-level problems.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.codecs import from_dict
from lightkube.types import PatchType
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from api.auth import Authenticator, Principal
from api.cache import ResourceCache, plain
from api.problems import Problem, validation_problems
from esi.resources.meta import API_VERSION, MAX_NAME_LENGTH, NAME_PATTERN, NAMESPACE_PATTERN, EsiModel
from esi.resources.scheduling import Scheduling, SchedulingSpec
from esi.wire.rest import (
    ApiError,
    ExternalBatchJob,
    ExternalScheduling,
    ExternalTestbed,
    Overview,
    external_batchjob,
    external_scheduling,
    external_testbed,
    overview,
    scheduling_spec,
)
from kube.resources import BatchJobResource, SchedulingResource

__all__ = ["JobUpdate", "router"]

REPLACE_ATTEMPTS: Final = 3


class ErrorBody(EsiModel):
    detail: ApiError


class JobUpdate(EsiModel):
    """``PUT /external/jobs``: a job's name and its new ``externalScheduler`` data; other fields are ignored,
    so a client may send back the whole ``ExternalBatchJob`` it read."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)
    external_scheduler: dict[str, list[dict[str, str]]] | None = Field(
        description="Replaces the job's data wholesale; null removes it."
    )


def _refusals(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {
        401: "No or an unknown bearer token",
        403: "The token's user may not do this in this namespace",
        404: "No such object in this namespace",
        409: "A conflicting change (e.g. the Scheduling is being deleted)",
        422: "The body or a parameter is invalid; `errors` names each field",
        503: "The Kubernetes API could not be asked",
    }
    return {code: {"model": ErrorBody, "description": meaning[code]} for code in (401, 403, 422, 503, *codes)}


bearer = HTTPBearer(auto_error=False, description="A Kubernetes token (in a cluster) or the local stack's token.")
router = APIRouter(prefix="/external", tags=["external scheduler API"])


def _cache(request: Request) -> ResourceCache:
    cache: ResourceCache = request.app.state.cache
    return cache


def _kube(request: Request) -> AsyncClient:
    kube: AsyncClient = request.app.state.kube
    return kube


def _namespace(
    request: Request,
    namespace: Annotated[
        str | None,
        Query(
            max_length=63,
            pattern=NAMESPACE_PATTERN,
            description="The namespace to work in; the server's default namespace when left out.",
        ),
    ] = None,
) -> str:
    return namespace or str(request.app.state.namespace)


Cache = Annotated[ResourceCache, Depends(_cache)]
Kube = Annotated[AsyncClient, Depends(_kube)]
Namespace = Annotated[str, Depends(_namespace)]


async def _caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    authenticator: Authenticator = request.app.state.authenticator
    principal = await authenticator.authenticate(credentials.credentials if credentials is not None else None)
    request.state.principal = principal  # for the access log
    return principal


Caller = Annotated[Principal, Depends(_caller)]


def _may(verb: str, *resources: str) -> Any:
    async def check(request: Request, caller: Caller, namespace: Namespace) -> None:
        authenticator: Authenticator = request.app.state.authenticator
        for resource in resources:
            await authenticator.authorize(caller, verb, resource, namespace)

    return Depends(check)


# Lists are rendered once per state of the cache (``ResourceCache.memo``) and sent as they are.
_TESTBEDS: Final = TypeAdapter(list[ExternalTestbed])
_JOBS: Final = TypeAdapter(dict[str, ExternalBatchJob])
_SCHEDULINGS: Final = TypeAdapter(list[ExternalScheduling])


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _not_found(kind: str, name: str, namespace: str) -> Problem:
    return Problem(404, f"Not found: {kind} {name} in namespace {namespace}")


# --- reads --------------------------------------------------------------------------------------------------


@router.get(
    "/overview",
    summary="One namespace at a glance",
    response_model=Overview,
    dependencies=[_may("list", "testbeds", "batchjobs", "schedulings")],
    responses=_refusals(),
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

    return _json(cache.memo(("overview", namespace), render))


@router.get(
    "/testbeds",
    summary="All Testbeds",
    response_model=list[ExternalTestbed],
    dependencies=[_may("list", "testbeds")],
    responses=_refusals(),
)
async def list_testbeds(cache: Cache, namespace: Namespace) -> Response:
    def render() -> bytes:
        return _TESTBEDS.dump_json([external_testbed(t) for t in cache.testbeds.in_namespace(namespace)])

    return _json(cache.memo(("testbeds", namespace), render))


@router.get("/testbeds/{name}", summary="One Testbed", dependencies=[_may("get", "testbeds")], responses=_refusals(404))
async def get_testbed(name: str, cache: Cache, namespace: Namespace) -> ExternalTestbed:
    testbed = cache.testbeds.get(namespace, name)
    if testbed is None:
        raise _not_found("Testbed", name, namespace)
    return external_testbed(testbed)


@router.get(
    "/jobs",
    summary="All BatchJobs, by name",
    response_model=dict[str, ExternalBatchJob],
    dependencies=[_may("list", "batchjobs")],
    responses=_refusals(),
)
async def list_jobs(cache: Cache, namespace: Namespace) -> Response:
    def render() -> bytes:
        return _JOBS.dump_json({j.metadata.name: external_batchjob(j) for j in cache.jobs.in_namespace(namespace)})

    return _json(cache.memo(("jobs", namespace), render))


@router.get("/jobs/{name}", summary="One BatchJob", dependencies=[_may("get", "batchjobs")], responses=_refusals(404))
async def get_job(name: str, cache: Cache, namespace: Namespace) -> ExternalBatchJob:
    job = cache.jobs.get(namespace, name)
    if job is None:
        raise _not_found("BatchJob", name, namespace)
    return external_batchjob(job)


@router.get(
    "/schedulings",
    summary="All Schedulings",
    response_model=list[ExternalScheduling],
    dependencies=[_may("list", "schedulings")],
    responses=_refusals(),
)
async def list_schedulings(cache: Cache, namespace: Namespace) -> Response:
    def render() -> bytes:
        return _SCHEDULINGS.dump_json([external_scheduling(s) for s in cache.schedulings.in_namespace(namespace)])

    return _json(cache.memo(("schedulings", namespace), render))


@router.get(
    "/schedulings/{name}",
    summary="One Scheduling",
    dependencies=[_may("get", "schedulings")],
    responses=_refusals(404),
)
async def get_scheduling(name: str, cache: Cache, namespace: Namespace) -> ExternalScheduling:
    scheduling = cache.schedulings.get(namespace, name)
    if scheduling is None:
        raise _not_found("Scheduling", name, namespace)
    return external_scheduling(scheduling)


# --- writes -------------------------------------------------------------------------------------------------

_JOB_UPDATE_EXAMPLE: Final = {
    "name": "wordcount",
    "externalScheduler": {"profiler": [{"wordcount": "41 (3)", "pagerank": "63 (2)"}]},
}


@router.put(
    "/jobs",
    summary="Replace a BatchJob's externalScheduler data",
    dependencies=[_may("patch", "batchjobs")],
    responses=_refusals(404),
)
@router.put("/jobs/", include_in_schema=False, dependencies=[_may("patch", "batchjobs")])
async def put_job(
    update: Annotated[JobUpdate, Body(openapi_examples={"profiler data": {"value": _JOB_UPDATE_EXAMPLE}})],
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
) -> ExternalBatchJob:
    patch: Any
    if update.external_scheduler is None:
        patch, patch_type = {"spec": {"externalScheduler": None}}, PatchType.MERGE
    else:
        patch = [{"op": "add", "path": "/spec/externalScheduler", "value": update.external_scheduler}]
        patch_type = PatchType.JSON
    try:
        patched = await kube.patch(BatchJobResource, update.name, patch, namespace=namespace, patch_type=patch_type)
    except KubeApiError as err:
        if err.status.code == 404:
            raise _not_found("BatchJob", update.name, namespace) from err
        raise
    job = cache.jobs.observed(plain(patched))
    if job is None:
        raise Problem(502, f"BatchJob {update.name} was changed, but esi cannot read it back")
    return external_batchjob(job)


_QUEUE_EXAMPLE: Final = {
    "name": "nightly",
    "testBed": "profiler-slots",
    "queue": ["wordcount", "pagerank", "wordcount"],
}
_SLOTS_EXAMPLE: Final = {
    "name": "pinned",
    "testBed": "scheduler-slots",
    "slots": {"mode": "STRICT", "jobs": [{"name": "wordcount", "slots": [0, 1]}, {"name": "pagerank", "slots": [2]}]},
}


@router.post(
    "/schedulings",
    summary="Create a Scheduling, or replace the jobs of an existing one",
    description=(
        "Creates the Scheduling, or — when one of that name exists — replaces its testbed and its queue or "
        "slot lists (the online-edit path: entries not yet started change, started ones run on). `state` and "
        "`jobStatus` in the body are ignored. 201 when created, 200 when replaced."
    ),
    status_code=status.HTTP_201_CREATED,
    dependencies=[_may("create", "schedulings")],
    responses={200: {"model": ExternalScheduling, "description": "Replaced"}, **_refusals(409)},
)
async def submit_scheduling(  # noqa: PLR0917 (FastAPI passes what the route declares)
    request: Annotated[
        ExternalScheduling,
        Body(
            openapi_examples={
                "queue": {"summary": "A queue: jobs in order, a job named twice runs twice", "value": _QUEUE_EXAMPLE},
                "slots": {"summary": "Explicit slots per job, strictly in order", "value": _SLOTS_EXAMPLE},
            }
        ),
    ],
    response: Response,
    http: Request,
    caller: Caller,
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
) -> ExternalScheduling:
    spec = scheduling_spec(request)
    try:
        SchedulingSpec.model_validate(spec)
    except ValidationError as err:
        problems = validation_problems(err, prefix="spec.")
        raise Problem(422, f"not a valid Scheduling: {', '.join(p.field for p in problems)}", problems) from err
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "Scheduling",
        "metadata": {"name": request.name, "namespace": namespace},
        "spec": spec,
    }
    try:
        written = await kube.create(from_dict(manifest))
    except KubeApiError as err:
        if err.status.code != 409:
            raise
        authenticator: Authenticator = http.app.state.authenticator
        await authenticator.authorize(caller, "update", "schedulings", namespace)
        written = await _replace_spec(kube, request.name, namespace, spec)
        response.status_code = status.HTTP_200_OK
    scheduling = cache.schedulings.observed(plain(written))
    if scheduling is None:
        raise Problem(502, f"Scheduling {request.name} was written, but esi cannot read it back")
    return external_scheduling(scheduling)


async def _replace_spec(kube: AsyncClient, name: str, namespace: str, spec: dict[str, Any]) -> Any:
    """Replace the strategy and Testbed of an existing Scheduling, keeping what the original's shape cannot
    say (its retry policy); optimistic: retried on a concurrent change, then a 409."""
    for _ in range(REPLACE_ATTEMPTS):
        current = plain(await kube.get(SchedulingResource, name, namespace=namespace))
        if current["metadata"].get("deletionTimestamp"):
            raise Problem(409, f"Scheduling {name} is being deleted; submit it again once it is gone")
        kept = {k: v for k, v in current.get("spec", {}).items() if k not in ("queueBased", "slotBased")}
        current["spec"] = {**kept, **spec}
        try:
            return await kube.replace(from_dict(current))
        except KubeApiError as err:
            if err.status.code != 409:
                raise
    raise Problem(409, f"Scheduling {name} kept changing while being replaced; try again")


@router.delete(
    "/schedulings/{name}",
    summary="Delete a Scheduling (its Testbed and jobs are released)",
    dependencies=[_may("delete", "schedulings")],
    responses=_refusals(404),
)
async def delete_scheduling(
    name: Annotated[str, Path(max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)], kube: Kube, namespace: Namespace
) -> ExternalScheduling:
    try:
        current = await kube.get(SchedulingResource, name, namespace=namespace)
        await kube.delete(SchedulingResource, name, namespace=namespace)
    except KubeApiError as err:
        if err.status.code == 404:
            raise _not_found("Scheduling", name, namespace) from err
        raise
    try:
        return external_scheduling(Scheduling.model_validate(plain(current)))
    except ValidationError as err:  # deleted all the same; only its last view cannot be shown
        raise Problem(502, f"Scheduling {name} was deleted, but esi cannot read what it was: {err}") from err
