"""``GET``/``POST /external/schedulings`` and ``GET``/``DELETE /external/schedulings/{name}``: Schedulings,
the one resource an external scheduler creates — submitted in the original's shape, replaced in place when
one of that name exists (the online-edit path)."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Path, Response, status
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.codecs import from_dict
from pydantic import TypeAdapter, ValidationError

from api.cache import ResourceCache
from api.dependencies import AskedView, Auth, Cache, Caller, CheckedFirst, Kube, Namespace, may
from api.problems import Problem, not_found, refusals
from api.routes.answers import listing, one
from esi.decisions.scheduling_lifecycle import spec_problems, testbed_view, unrunnable_problem
from esi.objects.applications import run_problem
from esi.resources.meta import API_VERSION, MAX_NAME_LENGTH, NAME_PATTERN
from esi.resources.scheduling import Scheduling, SchedulingSpec
from esi.wire.rest import (
    ExternalScheduling,
    FieldProblem,
    OriginalScheduling,
    SchedulingSubmission,
    View,
    external_scheduling,
    field_problems,
    scheduling_spec,
)
from kube.errors import Refusal, refusal
from kube.resources import BatchJobResource, SchedulingResource, plain

__all__ = ["REPLACE_ATTEMPTS", "router"]

REPLACE_ATTEMPTS: Final = 3
_REPLACED: Final = frozenset({"testbed", "slots", "queueBased", "slotBased"})

router = APIRouter(prefix="/external", tags=["external scheduler API"], route_class=CheckedFirst)

_SCHEDULINGS: Final[dict[View, TypeAdapter[Any]]] = {
    View.ORIGINAL: TypeAdapter(list[OriginalScheduling]),
    View.ESI: TypeAdapter(list[ExternalScheduling]),
}
_ONE: Final = OriginalScheduling | ExternalScheduling


def _to_the_submitted(method: str) -> dict[str, Any]:
    """An OpenAPI link from a submission's answer to ``method`` on the Scheduling it wrote, in its namespace."""
    return {
        "operationRef": f"#/paths/~1external~1schedulings~1{{name}}/{method}",
        "parameters": {"name": "$response.body#/name", "namespace": "$request.query.namespace"},
    }


# What a client does next with the Scheduling a submission wrote (for readers and fuzzers of the OpenAPI).
_SUBMITTED_LINKS: Final = {"GetScheduling": _to_the_submitted("get"), "DeleteScheduling": _to_the_submitted("delete")}


@router.get(
    "/schedulings",
    summary="All Schedulings",
    response_model=list[OriginalScheduling] | list[ExternalScheduling],
    dependencies=[may("list", "schedulings")],
    responses=refusals(),
)
async def list_schedulings(cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    def render() -> bytes:
        views = [external_scheduling(s) for s in cache.schedulings.in_namespace(namespace)]
        return bytes(_SCHEDULINGS[view].dump_json(views))

    return listing(cache, ("schedulings", namespace, view), render)


@router.get(
    "/schedulings/{name}",
    summary="One Scheduling",
    response_model=_ONE,
    dependencies=[may("get", "schedulings")],
    responses=refusals(404),
)
async def get_scheduling(name: str, cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    scheduling = cache.schedulings.get(namespace, name)
    if scheduling is None:
        raise not_found("Scheduling", name, namespace)
    return one(external_scheduling(scheduling), view)


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
        "slot lists (the online-edit path: entries not yet started change, started ones run on). `state`, "
        "`jobStatus` and any field the original's shape does not have are ignored; every field but `name`, "
        "`testBed` and one of `queue` or `slots` may be null. A Scheduling manifest, or a manifest's `testbed`, "
        "`queueBased` or `slotBased` in place of these, is a 422 naming them. 201 when created, 200 when replaced."
    ),
    status_code=status.HTTP_201_CREATED,
    response_model=_ONE,
    dependencies=[may("create", "schedulings")],
    responses={
        201: {"description": "Created", "links": _SUBMITTED_LINKS},
        200: {"model": _ONE, "description": "Replaced", "links": _SUBMITTED_LINKS},
        **refusals(409),
    },
)
async def submit_scheduling(  # noqa: PLR0917 (FastAPI passes what the route declares)
    request: Annotated[
        SchedulingSubmission,
        Body(
            openapi_examples={
                "queue": {"summary": "A queue: jobs in order, a job named twice runs twice", "value": _QUEUE_EXAMPLE},
                "slots": {"summary": "Explicit slots per job, strictly in order", "value": _SLOTS_EXAMPLE},
            }
        ),
    ],
    authenticator: Auth,
    caller: Caller,
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
    view: AskedView,
) -> Response:
    spec = scheduling_spec(request)
    try:
        validated = SchedulingSpec.model_validate(spec)
    except ValidationError as err:
        problems = field_problems(err, prefix="spec.")
        raise Problem(422, f"not a valid Scheduling: {', '.join(p.field for p in problems)}", problems) from err
    await _refuse_missing_jobs(request, cache, kube, namespace)
    _refuse_unplaceable(request, validated, cache, namespace)
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "Scheduling",
        "metadata": {"name": request.name, "namespace": namespace},
        "spec": spec,
    }
    status_code = status.HTTP_201_CREATED
    try:
        written = await kube.create(from_dict(manifest))
    except KubeApiError as err:
        if refusal(err) is not Refusal.CONFLICT:
            raise
        await authenticator.authorize(caller, "update", "schedulings", namespace)
        written = await _replace_spec(kube, request.name, namespace, spec)
        status_code = status.HTTP_200_OK
    scheduling = cache.schedulings.observed(plain(written))
    if scheduling is None:
        raise Problem(502, f"Scheduling {request.name} was written, but esi cannot read it back")
    return one(external_scheduling(scheduling), view, status_code)


async def _refuse_missing_jobs(
    request: SchedulingSubmission, cache: ResourceCache, kube: AsyncClient, namespace: str
) -> None:
    """422 naming each entry whose BatchJob does not exist. The cache may lag a job just created: the jobs it
    does not know are looked for in one LIST of the namespace's BatchJobs (not one GET each: a submission names
    up to 4,096), and when that cannot be read nothing is refused."""
    named = _entries(request)
    unknown = {job for _, job in named if cache.jobs.get(namespace, job) is None}
    listed = await _job_names(kube, namespace) if unknown else None
    missing = unknown - listed if listed is not None else set()
    if missing:
        raise Problem(
            422,
            f"Scheduling {request.name} names BatchJobs that do not exist in namespace {namespace}: "
            + ", ".join(sorted(missing)),
            [
                FieldProblem(field=field, problem=f"BatchJob {job} does not exist in namespace {namespace}")
                for field, job in named
                if job in missing
            ],
        )


async def _job_names(kube: AsyncClient, namespace: str) -> set[str] | None:
    """The names of the API server's BatchJobs in ``namespace``; None when it cannot tell (a refusal is not an
    absence)."""
    names: set[str] = set()
    try:
        async for job in kube.list(BatchJobResource, namespace=namespace):
            if job.metadata is not None and job.metadata.name:
                names.add(job.metadata.name)
    except KubeApiError:
        return None
    return names


def _entries(request: SchedulingSubmission) -> list[tuple[str, str]]:
    """(field, BatchJob name) of each job entry of a submission, in order."""
    if request.queue is not None:
        return [(f"queue[{i}]", job) for i, job in enumerate(request.queue)]
    assert request.slots is not None
    return [(f"slots.jobs[{i}].name", job.name) for i, job in enumerate(request.slots.jobs)]


def _refuse_unplaceable(
    request: SchedulingSubmission, spec: SchedulingSpec, cache: ResourceCache, namespace: str
) -> None:
    """422 for a Scheduling its Testbed could never run (slots it does not have, a job needing more slots than
    it has, a job no run of which could start in its slots …), as the Scheduling reconciler would find it; the
    slots are not judged while the Testbed has none, nor a job the cache does not know yet. A job that cannot
    run is named at its first entry."""
    testbed = cache.testbeds.get(namespace, request.test_bed)
    if testbed is None:
        return
    problems = spec_problems(spec, testbed_view(testbed.status, None), namespace)
    errors = [FieldProblem(field="queue" if request.queue is not None else "slots", problem=p) for p in problems]
    judged: set[str] = set()
    for field, name in _entries(request):
        job = cache.jobs.get(namespace, name)
        why = run_problem(job, request.test_bed, testbed.spec) if job is not None and name not in judged else None
        judged.add(name)
        if why is not None:
            problems.append(unrunnable_problem(name, request.test_bed, why))
            errors.append(FieldProblem(field=field, problem=problems[-1]))
    if problems:
        raise Problem(
            422, f"Testbed {request.test_bed} could never run Scheduling {request.name}: {'; '.join(problems)}", errors
        )


async def _replace_spec(kube: AsyncClient, name: str, namespace: str, spec: dict[str, Any]) -> Any:
    """Replace the strategy and Testbed of an existing Scheduling, keeping what the original's shape cannot
    say (its retry policy); optimistic: retried on a concurrent change, then a 409."""
    for _ in range(REPLACE_ATTEMPTS):
        current = plain(await kube.get(SchedulingResource, name, namespace=namespace))
        if current["metadata"].get("deletionTimestamp"):
            raise Problem(409, f"Scheduling {name} is being deleted; submit it again once it is gone")
        # The Testbed (under either of its names) and the strategy are what is replaced.
        kept = {k: v for k, v in current.get("spec", {}).items() if k not in _REPLACED}
        current["spec"] = {**kept, **spec}
        try:
            return await kube.replace(from_dict(current))
        except KubeApiError as err:
            if refusal(err) is not Refusal.CONFLICT:
                raise
    raise Problem(409, f"Scheduling {name} kept changing while being replaced; try again")


@router.delete(
    "/schedulings/{name}",
    summary="Delete a Scheduling (its Testbed and jobs are released)",
    description="Answers with what the Scheduling was. From then on reads do not show it; while esi releases "
    "its Testbed and jobs, a submission of the same name is a 409.",
    dependencies=[may("delete", "schedulings")],
    response_model=_ONE,
    responses=refusals(404),
)
async def delete_scheduling(
    name: Annotated[str, Path(max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)],
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
    view: AskedView,
) -> Response:
    try:
        current = await kube.get(SchedulingResource, name, namespace=namespace)
        await kube.delete(SchedulingResource, name, namespace=namespace)
    except KubeApiError as err:
        if refusal(err) is Refusal.NOT_FOUND:
            raise not_found("Scheduling", name, namespace) from err
        raise
    cache.schedulings.deleted(plain(current))  # read after it, it is gone (its finalizer may still run)
    try:
        return one(external_scheduling(Scheduling.model_validate(plain(current))), view)
    except ValidationError as err:  # deleted all the same; only its last view cannot be shown
        raise Problem(502, f"Scheduling {name} was deleted, but esi cannot read what it was: {err}") from err
