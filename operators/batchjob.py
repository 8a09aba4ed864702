"""The BatchJob reconciler: runs a job's application in the slots its Scheduling reserved, and tracks it.

A thin shell around ``esi.decisions.batchjob_lifecycle.decide_batchjob``. It observes who holds the job (its hold, and
that Scheduling's record of the job's slots), the job's SparkApplication or FlinkDeployment and that
application's pods; it creates the application (``esi.objects.applications`` builds it) once slots are reserved,
deletes it when the job is released, and is the only writer of the BatchJob's status and run history — and of
the Run objects that keep each run once its record is final (``esi.objects.runs``). A BatchJob being deleted keeps
every run not kept yet before it goes (``keep_runs_when_deleted``, by kopf's finalizer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import httpx2
import kopf
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from pydantic import ValidationError

from esi.decisions.batchjob_lifecycle import (
    STALLED_AFTER,
    BatchJobObservation,
    CreateApplication,
    DeleteApplication,
    Holder,
    KeepRun,
    decide_batchjob,
    decide_unbuildable,
    neighbours_on,
    runs_to_keep_when_deleted,
    slot_nodes,
    slots_listed,
)
from esi.decisions.testbed_lifecycle import FINISHED_PHASES
from esi.objects.applications import (
    FLINK,
    SPARK,
    ApplicationError,
    ApplicationKind,
    SlotAssignment,
    application_kind,
    application_manifest,
    slot_assignment,
)
from esi.objects.applications import application_view as view_of_application
from esi.objects.holds import HOLD_KIND_LABEL, Hold, HoldKind, read_hold
from esi.objects.names import JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL, is_executor
from esi.objects.runs import Retention, run_manifest
from esi.resources.batchjob import BatchJob, RunRecord
from esi.resources.meta import GROUP, VERSION, state_named, utc_now
from esi.resources.scheduling import JobState, RetryPolicy, testbed_name
from esi.resources.testbed import Slot, TestbedSpec, TestbedStatus
from kube.errors import Refusal, ignore, refusal
from kube.indexes import index
from kube.resources import BatchJobResource, plain
from kube.writes import create, write_status
from operators.daemons import (
    CHAIN_DEBOUNCE_SECONDS,
    DAEMON_EXIT_SECONDS,
    HoldKey,
    Wakeups,
    first,
    hold_of,
    holds,
    post_events,
    swap_seen,
)
from operators.pods import PODS, PodIndex, RawPod, labels_of, namespace_of
from operators.scheduling import testbed_tables

__all__: list[str] = []

Key = tuple[str, str]  # (namespace, name)
RETRY = RetryPolicy()  # the defaults of a Scheduling's retry policy
KEEP_TRIES: Final = 5  # tries to keep a deleted BatchJob's runs; then it goes without those not kept, said so
KEEP_RETRY_SECONDS: Final = 10.0
_wakeups = Wakeups("batchjob", CHAIN_DEBOUNCE_SECONDS)


def _resource(kind: ApplicationKind) -> Any:
    return create_namespaced_resource(kind.group, kind.version, kind.kind, kind.plural)


# --- caches ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Record:
    """What a Scheduling recorded about one of its jobs."""

    scheduling_uid: str
    testbed: str
    state: str
    slots: tuple[int, ...]
    attempt: int
    start_timeout: timedelta


@index(GROUP, VERSION, "schedulings")
def scheduling_records(
    *, name: str, namespace: str | None, uid: str, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[tuple[str, str, str], _Record]:
    """Per (namespace, scheduling, job): the job's slots and state as the Scheduling recorded them."""
    testbed = testbed_name(spec)
    timeout = timedelta(
        seconds=int((spec.get("retry") or {}).get("startTimeoutSeconds") or RETRY.start_timeout_seconds)
    )
    return {
        (namespace or "", name, job["name"]): _Record(
            uid, testbed, job.get("state", ""), tuple(job.get("slots", ())), int(job.get("attempt", 1)), timeout
        )
        for job in status.get("jobs", [])
    }


@index(SPARK.group, SPARK.version, SPARK.plural, labels={MANAGED_BY_LABEL: MANAGED_BY})
def spark_applications(*, name: str, namespace: str | None, body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name): dict(body)}


@index(FLINK.group, FLINK.version, FLINK.plural, labels={MANAGED_BY_LABEL: MANAGED_BY})
def flink_deployments(*, name: str, namespace: str | None, body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace or "", name): dict(body)}


def _pod_summary(pod: RawPod) -> dict[str, Any]:
    """What ``application_view`` reads of a pod: its node and phase, and why it is not placed or started."""
    status = pod.get("status") or {}

    def waiting(containers: Any) -> list[dict[str, Any]]:
        return [
            {"state": {"waiting": c["state"]["waiting"]}} for c in containers or () if "waiting" in c.get("state", {})
        ]

    return {
        "metadata": {
            "name": pod["metadata"]["name"],
            "labels": dict(labels_of(pod)),
            "deletionTimestamp": pod["metadata"].get("deletionTimestamp"),
        },
        "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
        "status": {
            "phase": status.get("phase"),
            "nominatedNodeName": status.get("nominatedNodeName"),
            "conditions": [c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"],
            "initContainerStatuses": waiting(status.get("initContainerStatuses")),
            "containerStatuses": waiting(status.get("containerStatuses")),
        },
    }


def _application_of(pod: RawPod) -> tuple[ApplicationKind, str] | None:
    """The kind and name of the application whose operator made ``pod`` (its driver or executors, its
    JobManager or TaskManagers), by the labels each operator puts on its pods; None for any other pod."""
    labels = labels_of(pod)
    if SPARK.pod_label in labels:
        return SPARK, labels[SPARK.pod_label]
    if FLINK.pod_label in labels and labels.get("type") == "flink-native-kubernetes":
        return FLINK, labels[FLINK.pod_label]
    return None


@PODS.index
def spark_pods(pod: RawPod) -> dict[Key, dict[str, Any]]:
    owner = _application_of(pod)
    return {(namespace_of(pod), owner[1]): _pod_summary(pod)} if owner is not None and owner[0] is SPARK else {}


@PODS.index
def flink_pods(pod: RawPod) -> dict[Key, dict[str, Any]]:
    owner = _application_of(pod)
    return {(namespace_of(pod), owner[1]): _pod_summary(pod)} if owner is not None and owner[0] is FLINK else {}


@PODS.index
def executors_on_nodes(pod: RawPod) -> dict[str, Key]:
    """Per node, the (namespace, job) of every unfinished executor on it: who runs next to whom."""
    labels = labels_of(pod)
    node = (pod.get("spec") or {}).get("nodeName")
    if not is_executor(labels) or JOB_LABEL not in labels or not node:
        return {}
    if (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
        return {}
    return {node: (namespace_of(pod), labels[JOB_LABEL])}


# Runs of each job that can still meet a run being recorded: the latest ones (older ones have long ended).
_RECENT_RUNS = 5

RunOnNode = tuple[Key, datetime, datetime | None]  # (namespace, job), start, end


@index(GROUP, VERSION, "batchjobs")
def runs_on_nodes(
    *, name: str, namespace: str | None, status: kopf.Status, **_: Any
) -> dict[str, tuple[RunOnNode, ...]]:
    """Per node, the recent runs recorded there: who ran next to whom, after their pods are gone."""
    found: dict[str, list[RunOnNode]] = {}
    for raw in (status.get("runs") or [])[-_RECENT_RUNS:]:
        try:
            run = RunRecord.model_validate(raw)
        except ValidationError:
            continue  # written by another version of esi
        for node in run.nodes:
            found.setdefault(node, []).append(((namespace or "", name), run.start, run.end))
    return {node: tuple(runs) for node, runs in found.items()}


# --- wake-ups ------------------------------------------------------------------------------------------


@kopf.on.event(GROUP, VERSION, "batchjobs")
async def _runs_changed(*, name: str, namespace: str | None, status: kopf.Status, **indexes: Any) -> None:
    """A job's last run, recorded or changed, may have met the jobs recorded on its nodes: they look again."""
    runs = status.get("runs") or []
    if not runs:
        return
    recorded = runs_on_nodes.of(indexes)
    me = (namespace or "", name)
    _wakeups.wake(
        {job for node in runs[-1].get("nodes") or () for entries in recorded.get(node, ()) for job, *_ in entries}
        - {me}
    )


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={HOLD_KIND_LABEL: HoldKind.BATCHJOB.value})
async def _hold_changed(*, namespace: str | None, body: kopf.Body, **_: Any) -> None:
    # Later: a new holder's reservation follows in a moment and wakes the job (one decision for both).
    hold = read_hold(body)
    if hold is not None:
        _wakeups.wake_later([(namespace or "", hold.held)], CHAIN_DEBOUNCE_SECONDS)


TestbedView = tuple[Mapping[str, Any], dict[str, dict[Any, Mapping[str, Any]]]]  # spec, rows by job and slot id

# Each Testbed as it last woke the BatchJobs: what a job reads of it is its spec and the rows of its slots.
_testbeds_seen: dict[Key, TestbedView] = {}


def testbed_view(spec: Mapping[str, Any], slots: Iterable[Mapping[str, Any]]) -> TestbedView:
    """A Testbed's spec, and the rows of its slot table by the job each lists and their slot id (rows of no job
    left out)."""
    rows: dict[str, dict[Any, Mapping[str, Any]]] = {}
    for row in slots:
        if job := row.get("job"):
            rows.setdefault(str(job), {})[row.get("id")] = row
    return dict(spec), rows


def jobs_to_wake(before: TestbedView | None, after: TestbedView | None) -> set[str] | None:
    """The jobs whose rows of a Testbed's slot table changed (listed before, after or both); None: every job of
    the namespace — the Testbed appeared, went, or its spec changed."""
    if before is None or after is None or before[0] != after[0]:
        return None
    return {job for job in before[1].keys() | after[1].keys() if before[1].get(job) != after[1].get(job)}


@kopf.on.event(GROUP, VERSION, "testbeds")
async def _testbed_changed(
    *, name: str, namespace: str | None, type: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> None:
    # Its slot table may now list a waiting job's slots, or no longer list a job's; a job acts on its slots' rows
    # once they list it, so the others have nothing new (a Testbed's status changes with every pod on its nodes).
    # Rows that changed are on the way from a Scheduling to its running job: at once.
    key = (namespace or "", name)
    after = None if type == "DELETED" else testbed_view(spec, status.get("slots") or ())
    jobs = jobs_to_wake(swap_seen(_testbeds_seen, key, after), after)
    if jobs is None:
        _wakeups.wake_where(lambda job: isinstance(job, tuple) and job[0] == key[0])
    else:
        _wakeups.wake([(key[0], job) for job in jobs], at_once=True)


@kopf.on.event(GROUP, VERSION, "schedulings")
async def _scheduling_changed(*, namespace: str | None, status: kopf.Status, spec: kopf.Spec, **_: Any) -> None:
    names = {job.get("name") for job in status.get("jobs", [])} | {
        ref.get("name") for ref in spec.get("queueBased") or []
    }
    names |= {job.get("name", {}).get("name") for job in (spec.get("slotBased") or {}).get("jobs", [])}
    _wakeups.wake([(namespace or "", job) for job in names if job])


@kopf.on.event(SPARK.group, SPARK.version, SPARK.plural)
@kopf.on.event(FLINK.group, FLINK.version, FLINK.plural)
async def _application_changed(*, name: str, namespace: str | None, **_: Any) -> None:
    _wakeups.wake([(namespace or "", name)])


@PODS.on_change
def _application_pod_changed(pod: RawPod | None, _: Mapping[str, Any]) -> None:
    if pod is None:  # all pods listed again
        _wakeups.wake()
    elif (owner := _application_of(pod)) is not None:
        _wakeups.wake([(namespace_of(pod), owner[1])])


# --- the reconciler -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Caches:
    holds: kopf.Index[HoldKey, Hold]
    records: kopf.Index[tuple[str, str, str], _Record]
    testbeds: kopf.Index[Key, dict[str, Any]]
    applications: Mapping[str, kopf.Index[Key, dict[str, Any]]]  # by application kind
    pods: Mapping[str, PodIndex[Key, dict[str, Any]]]  # by application kind
    executors_on_nodes: PodIndex[str, Key]
    runs_on_nodes: kopf.Index[str, tuple[RunOnNode, ...]]

    def runs_on(self, nodes: Iterable[str]) -> dict[str, list[RunOnNode]]:
        """The runs recorded on ``nodes``, one list per node (the index holds one tuple per job)."""
        return {node: [run for runs in self.runs_on_nodes.get(node, ()) for run in runs] for node in nodes}

    @classmethod
    def of(cls, indexes: Mapping[str, Any]) -> _Caches:
        """The indexes the BatchJob reconciler reads, among those kopf passes a handler."""
        return cls(
            holds=holds.of(indexes),
            records=scheduling_records.of(indexes),
            testbeds=testbed_tables.of(indexes),
            applications={SPARK.kind: spark_applications.of(indexes), FLINK.kind: flink_deployments.of(indexes)},
            pods={SPARK.kind: spark_pods, FLINK.kind: flink_pods},
            executors_on_nodes=executors_on_nodes,
            runs_on_nodes=runs_on_nodes.of(indexes),
        )


@kopf.daemon(GROUP, VERSION, "batchjobs", cancellation_backoff=DAEMON_EXIT_SECONDS, cancellation_timeout=10)
async def run_batchjob(
    *,
    name: str,
    namespace: str | None,
    body: kopf.Body,
    stopped: kopf.DaemonStopped,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **indexes: Any,
) -> None:
    key = (namespace or "", name)
    caches = _Caches.of(indexes)
    stalled_after = memo.get("stalled_after", STALLED_AFTER)
    keeps_runs = memo.get("retention", Retention()).keeps_runs
    if not await PODS.wait_listed(stopped):
        return

    def decide() -> Awaitable[float | None]:
        return _reconcile(key, body, memo.client, caches, logger, stalled_after=stalled_after, keeps_runs=keeps_runs)

    await _wakeups.run(key, stopped, decide, logger)


@kopf.on.delete(GROUP, VERSION, "batchjobs", retries=KEEP_TRIES, backoff=KEEP_RETRY_SECONDS)
async def keep_runs_when_deleted(
    *, name: str, namespace: str | None, body: kopf.Body, retry: int, memo: kopf.Memo, logger: kopf.Logger, **_: Any
) -> None:
    """Keep every run of the job's history not kept yet, before the job goes (docs/design.md#runs). Run again
    after a crash, it keeps what is still missing; after ``KEEP_TRIES`` refusals it lets the job go and says
    which runs were lost."""
    if not memo.get("retention", Retention()).keeps_runs:
        return
    await _wakeups.ended((namespace or "", name), timeout=DAEMON_EXIT_SECONDS)  # its last status written first
    client: AsyncClient = memo.client
    left: list[KeepRun] = []
    try:
        job = BatchJob.model_validate(plain(await client.get(BatchJobResource, name, namespace=namespace)))
        left = list(runs_to_keep_when_deleted(job.status, now=utc_now()))
        while left:
            if not await create(client, run_manifest(job, left[0].ordinal, left[0].record)):
                return  # its namespace is being deleted: its Runs would go with it
            left.pop(0)
    except ValidationError as err:  # the API server's schema lets it through; esi's stricter rules do not
        _runs_lost(body, logger, f"esi cannot read its runs ({err})")
    except httpx2.HTTPError as err:  # ApiError among them
        if retry + 1 < KEEP_TRIES and not (isinstance(err, ApiError) and refusal(err).of_the_request):
            raise kopf.TemporaryError(f"keeping the runs of batchjob {name}: {err}", delay=KEEP_RETRY_SECONDS) from err
        lost = ", ".join(str(keep.ordinal) for keep in left) or "not known"
        _runs_lost(body, logger, f"runs {lost} are not kept as Runs ({err})")


def _runs_lost(body: kopf.Body, logger: kopf.Logger, why: str) -> None:
    message = f"the BatchJob goes without the runs it had not kept: {why}"
    logger.error(message)
    kopf.event(body, type="Warning", reason="RunsLost", message=message)


def _holder(key: Key, caches: _Caches) -> Holder | None:
    namespace, name = key
    hold = hold_of(caches.holds, namespace, HoldKind.BATCHJOB, name)
    if hold is None:
        return None
    record = first(caches.records.get((namespace, hold.scheduling, name)))
    if record is None or record.scheduling_uid != hold.scheduling_uid:
        return Holder(hold.scheduling, "")  # held, nothing recorded for it yet
    state = state_named(JobState, record.state)
    reserved = state is not None and state.allocated
    return Holder(
        hold.scheduling, record.testbed, record.slots if reserved else (), record.attempt, record.start_timeout
    )


def _holder_rows(namespace: str, holder: Holder | None, caches: _Caches) -> list[Slot | None]:
    """The rows of the holder's slots in its Testbed's slot table (None: a slot the table does not list)."""
    if holder is None:
        return []
    raw = first(caches.testbeds.get((namespace, holder.testbed)))
    table = {slot.get("id"): slot for slot in ((raw or {}).get("status") or {}).get("slots") or ()}
    rows = (table.get(slot) for slot in holder.slots)
    return [Slot.model_validate(row) if row is not None else None for row in rows]


def _assignment(namespace: str, action: CreateApplication, caches: _Caches) -> SlotAssignment | str:
    """Where the slots are: from the Testbed's spec and slot table; or why that is not known (yet)."""
    raw = first(caches.testbeds.get((namespace, action.testbed)))
    if raw is None:
        return f"testbed {action.testbed} does not exist"
    spec = TestbedSpec.model_validate(raw["spec"])
    table = TestbedStatus.model_validate(raw["status"]).slots if raw["status"] else []
    return slot_assignment(action.testbed, spec, table, action.slots, action.attempt)


async def _reconcile(
    key: Key,
    body: kopf.Body,
    client: AsyncClient,
    caches: _Caches,
    logger: kopf.Logger,
    *,
    stalled_after: timedelta,
    keeps_runs: bool,
) -> float | None:
    namespace, name = key
    if body["metadata"].get("deletionTimestamp"):
        return None  # being deleted: its runs are kept by keep_runs_when_deleted; nothing more to decide
    raw_status = dict(body.get("status") or {})
    try:
        job = BatchJob.model_validate(
            {"metadata": dict(body["metadata"]), "spec": dict(body["spec"]), "status": raw_status or None}
        )
    except ValidationError as err:  # the API server's schema lets it through; esi's stricter rules do not
        kopf.event(body, type="Warning", reason="Invalid", message=str(err))
        return None
    kind = application_kind(job)
    raw_application = first(caches.applications[kind.kind].get(key))
    pods = list(caches.pods[kind.kind].get(key, ()))
    application = view_of_application(raw_application, pods) if raw_application is not None else None
    holder = _holder(key, caches)
    rows = _holder_rows(namespace, holder, caches)
    nodes_of_slots = slot_nodes(rows)
    last_run = job.status.runs[-1].nodes if job.status is not None and job.status.runs else []
    nodes = {*(application.nodes if application else ()), *nodes_of_slots, *last_run}
    observation = BatchJobObservation(
        holder=holder,
        application=application,
        leftover_pods=len(pods),
        slot_nodes=nodes_of_slots,
        neighbours=neighbours_on(key, nodes, caches.executors_on_nodes, caches.runs_on(nodes)),
        slots_listed=slots_listed(name, rows),
    )
    generation, now = body["metadata"].get("generation"), utc_now()
    decision = decide_batchjob(
        job.status, observation, generation=generation, now=now, stalled_after=stalled_after, keeps_runs=keeps_runs
    )
    resource = _resource(kind)
    for action in decision.actions:
        if isinstance(action, KeepRun):  # first: the status written below counts it as kept
            if not await create(client, run_manifest(job, action.ordinal, action.record)):
                return None  # the namespace is being deleted, and the BatchJob with it
        elif isinstance(action, DeleteApplication):
            await ignore(Refusal.NOT_FOUND, client.delete(resource, name, namespace=namespace))
        elif isinstance(action, CreateApplication):
            assignment = _assignment(namespace, action, caches)
            if isinstance(assignment, str):
                logger.info(f"batchjob {namespace}/{name} waits: {assignment}")
                return None  # decided again when the Testbed is known
            try:
                manifest = application_manifest(job, assignment, namespace=namespace, uid=body["metadata"]["uid"])
            except ApplicationError as err:
                decision = decide_unbuildable(
                    decision, observation, str(err), generation=generation, now=now, keeps_runs=keeps_runs
                )
                break
            if not await create(client, manifest):
                return None  # the namespace is being deleted, and the BatchJob with it
    await write_status(client, BatchJobResource.Status, body, raw_status, decision.status.to_json_dict())
    post_events(body, decision.events)
    return decision.decide_again_in
