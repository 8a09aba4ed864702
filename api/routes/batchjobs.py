"""``GET /external/jobs``, ``GET /external/jobs/{name}`` and ``PUT /external/jobs``: BatchJobs (the original's
"jobs") and the one thing an external scheduler writes on them, its ``externalScheduler`` data."""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Response
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.types import PatchType
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from api.dependencies import AskedView, Cache, CheckedFirst, Kube, Namespace, may
from api.problems import Problem, not_found, refusals
from api.routes.answers import listing, one
from esi.resources.batchjob import MAX_EXTERNAL_SCHEDULER_BYTES, BatchJob
from esi.resources.meta import EsiModel, ObjectName
from esi.wire.rest import ExternalBatchJob, OriginalBatchJob, View, external_batchjob, field_problems
from kube.errors import Refusal, refusal
from kube.resources import BatchJobResource, plain

__all__ = ["JobUpdate", "router"]

router = APIRouter(prefix="/external", tags=["external scheduler API"], route_class=CheckedFirst)

_JOBS: Final[dict[View, TypeAdapter[Any]]] = {
    View.ORIGINAL: TypeAdapter(dict[str, OriginalBatchJob]),
    View.ESI: TypeAdapter(dict[str, ExternalBatchJob]),
}


class JobUpdate(EsiModel):
    """``PUT /external/jobs``: a job's name and its new ``externalScheduler`` data; other fields are ignored,
    so a client may send back the whole BatchJob it read (the original's clients do, nulls included)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: ObjectName
    external_scheduler: dict[str, list[dict[str, str]]] | None = Field(
        default=None,
        description="Replaces the job's data wholesale; null removes it; left out, it stays as it is. At most "
        f"{MAX_EXTERNAL_SCHEDULER_BYTES // 1024} KiB as JSON, what a BatchJob holds beside its spec and runs.",
    )

    @field_validator("external_scheduler")
    @classmethod
    def _fits_a_batchjob(cls, data: dict[str, list[dict[str, str]]] | None) -> dict[str, list[dict[str, str]]] | None:
        size = len(json.dumps(data, separators=(",", ":")).encode()) if data is not None else 0
        if size > MAX_EXTERNAL_SCHEDULER_BYTES:
            raise ValueError(
                f"{size:,} bytes as JSON: a BatchJob holds at most {MAX_EXTERNAL_SCHEDULER_BYTES // 1024} KiB"
            )
        return data


@router.get(
    "/jobs",
    summary="All BatchJobs, by name",
    response_model=dict[str, OriginalBatchJob] | dict[str, ExternalBatchJob],
    dependencies=[may("list", "batchjobs")],
    responses=refusals(),
)
async def list_jobs(cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    def render() -> bytes:
        jobs = {j.metadata.name: external_batchjob(j) for j in cache.jobs.in_namespace(namespace)}
        return bytes(_JOBS[view].dump_json(jobs))

    return listing(cache, ("jobs", namespace, view), render)


@router.get(
    "/jobs/{name}",
    summary="One BatchJob",
    response_model=OriginalBatchJob | ExternalBatchJob,
    dependencies=[may("get", "batchjobs")],
    responses=refusals(404),
)
async def get_job(name: str, cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    job = cache.jobs.get(namespace, name)
    if job is None:
        raise not_found("BatchJob", name, namespace)
    return one(external_batchjob(job), view)


_JOB_UPDATE_EXAMPLE: Final = {
    "name": "wordcount",
    "externalScheduler": {"profiler": [{"wordcount": "41 (3)", "pagerank": "63 (2)"}]},
}


@router.put(
    "/jobs",
    summary="Replace a BatchJob's externalScheduler data",
    response_model=OriginalBatchJob | ExternalBatchJob,
    dependencies=[may("patch", "batchjobs")],
    responses=refusals(404),
)
@router.put("/jobs/", include_in_schema=False, dependencies=[may("patch", "batchjobs")])
async def put_job(
    update: Annotated[JobUpdate, Body(openapi_examples={"profiler data": {"value": _JOB_UPDATE_EXAMPLE}})],
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
    view: AskedView,
) -> Response:
    if cache.jobs.get(namespace, update.name) is None:
        await _refuse_a_job_that_cannot_run(kube, update.name, namespace)
    patch: Any
    if "external_scheduler" not in update.model_fields_set:
        patch, patch_type = [], PatchType.JSON  # nothing to change: the job as it is (or 404)
    elif update.external_scheduler is None:
        patch, patch_type = {"spec": {"externalScheduler": None}}, PatchType.MERGE
    else:
        patch = [{"op": "add", "path": "/spec/externalScheduler", "value": update.external_scheduler}]
        patch_type = PatchType.JSON
    try:
        patched = await kube.patch(BatchJobResource, update.name, patch, namespace=namespace, patch_type=patch_type)
    except KubeApiError as err:
        if refusal(err) is Refusal.NOT_FOUND:
            raise not_found("BatchJob", update.name, namespace) from err
        raise
    job = cache.jobs.observed(plain(patched))
    if job is None:
        raise Problem(502, f"BatchJob {update.name} was changed, but esi cannot read it back")
    return one(external_batchjob(job), view)


async def _refuse_a_job_that_cannot_run(kube: AsyncClient, name: str, namespace: str) -> None:
    """404 for a job that does not exist; 422 naming each field for one stored in a shape esi's model refuses
    (written before the CRD had the rule, e.g. a driver without its ServiceAccount): it could never run, and its
    manifest is what to fix. Asked of the API server only for a job the cache does not hold (it holds only
    jobs esi reads)."""
    try:
        raw = plain(await kube.get(BatchJobResource, name, namespace=namespace))
    except KubeApiError as err:
        if refusal(err) is Refusal.NOT_FOUND:
            raise not_found("BatchJob", name, namespace) from err
        raise
    try:
        BatchJob.model_validate(raw)
    except ValidationError as err:
        problems = field_problems(err, whole="(object)")
        raise Problem(
            422,
            f"BatchJob {name} can never run as it is stored; fix its manifest first: "
            + ", ".join(p.field for p in problems),
            problems,
        ) from err
