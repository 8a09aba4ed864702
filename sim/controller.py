"""The kopf shell of the simulated operators: caches, a work queue, and the writes ``sim.lifecycle`` asks for.

kopf *indexes* are the caches: every SparkApplication and FlinkDeployment by uid, the simulated pods and
JobManager Deployments by their application's uid, the executors bound to each node (for co-location), and the
applications whose executors are bound for each node by their spec (for start-up, before the executors exist).
kopf fills them from its watches and starts no other handler until all of them hold the first complete
listing, so when the ``on.event`` handlers queue an application, the caches already show the whole cluster — a
restarted simulator never mistakes "not listed yet" for "deleted".

One worker takes applications off the queue and decides (``lifecycle.decide``) on what the caches show; an
application is queued again when it, one of its pods or its Deployment changes, when an executor of another
one comes to a node it runs on (its run may slow down), when its run is due to end, after a refused write (a
second later), and every ``RESYNC_SECONDS``. Writes to an application are merge patches that carry the
resourceVersion the decision was made on, so the API server refuses (409) a decision taken on a view that has
moved on; pods and Deployments are created under names fixed by the application, so creating one twice is
harmless. The simulator needs no finalizer (and adds none: daemons and timers would): a deleted application's
pods are removed by the garbage collector through their owner references.

The co-location tables of namespaces (``sim.runtime.Tables``) come from the ConfigMaps labelled ``TABLE_LABEL``: a
change replaces the namespace's table for the runs planned from then on, a deletion goes back to the default; a
ConfigMap whose table cannot be used is reported (a log line and a Warning Event on it, naming line and field) and
the namespace keeps the table it had. The worker reads the tables current when it decides, and starts only once
it has read the ConfigMaps there are (one list), so no run is planned from the default table for want of a first
watch event.

The pods, Deployments and table ConfigMaps are selected by the API server (the labels ``APP_UID_LABEL`` and
``TABLE_LABEL``), as the real Spark operator's cache selects its pods (by
``sparkoperator.k8s.io/launched-by-spark-operator``): the simulator is sent no other pod of the cluster (kopf's
``labels=`` filters on the handlers are client-side, after each event has been received and parsed).

kopf stores nothing on the objects here (there are no change-detecting handlers); its storages are set to the
prefix ``sim.esi.tu-berlin.de`` anyway, so this operator can never collide with esi's own kopf operator, which
uses ``esi.tu-berlin.de``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import heapq
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

import httpx2
import kopf
from lightkube import ApiError, AsyncClient, operators
from lightkube.codecs import from_dict
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Pod, PodStatus
from lightkube.types import PatchType

from esi.results.calibration import TABLE_LABEL
from kube.errors import Refusal, ignore, refusal
from kube.indexes import index
from sim.crds import FLINK, SPARK
from sim.lifecycle import (
    Annotate,
    CreateDeployment,
    CreatePod,
    Decision,
    DeletePod,
    EndPod,
    Observation,
    SimSettings,
    WriteStatus,
    decide,
    is_over,
    rejected,
)
from sim.names import APP_UID_LABEL, PREFIX
from sim.pods import (
    DeploymentView,
    NodeExecutor,
    PodView,
    deployment_view,
    ended_pod_status,
    executor_placement,
    node_executor,
    pod_view,
)
from sim.runtime import ModelError, Tables

__all__ = ["FIELD_MANAGER", "RESYNC_SECONDS", "RETRY_SECONDS", "WorkQueue", "merge_patch", "select_own_objects"]

FIELD_MANAGER: Final = "esi-sim"
RESYNC_SECONDS: Final = 30.0
RETRY_SECONDS: Final = 1.0

_RESOURCES: Final = {t.kind: create_namespaced_resource(t.group, t.version, t.kind, t.plural) for t in (SPARK, FLINK)}
_log = logging.getLogger("sim")


class WorkQueue:
    """Application uids to decide on, each queued once, at its earliest due time (``loop.time()``)."""

    def __init__(self) -> None:
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._changed = asyncio.Event()

    def add(self, key: str, delay: float = 0.0) -> None:
        due = asyncio.get_running_loop().time() + max(delay, 0.0)
        if key in self._due and self._due[key] <= due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        self._changed.set()

    async def get(self) -> str:
        loop = asyncio.get_running_loop()
        while True:
            while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
                heapq.heappop(self._heap)  # superseded by an earlier due time, or already taken
            now = loop.time()
            if self._heap and self._heap[0][0] <= now:
                _, key = heapq.heappop(self._heap)
                del self._due[key]
                return key
            self._changed.clear()
            timeout = self._heap[0][0] - now if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: removed keys become null."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = copy.deepcopy(value)
    return patch


# --- caches ------------------------------------------------------------------------------------------------


def _snapshot(body: kopf.Body) -> dict[str, Any]:
    return copy.deepcopy(dict(body))


@index(SPARK.group, SPARK.version, SPARK.plural)
def sim_spark_applications(*, uid: str | None, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    return {uid: _snapshot(body)} if uid else {}


@index(FLINK.group, FLINK.version, FLINK.plural)
def sim_flink_deployments(*, uid: str | None, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    return {uid: _snapshot(body)} if uid else {}


@index("", "v1", "pods", labels={APP_UID_LABEL: kopf.PRESENT})
def sim_pods(*, body: kopf.Body, **_: Any) -> dict[str, PodView]:
    view = pod_view(body)
    return {view.app_uid: view} if view is not None else {}


@index("apps", "v1", "deployments", labels={APP_UID_LABEL: kopf.PRESENT})
def sim_deployments(*, body: kopf.Body, **_: Any) -> dict[str, DeploymentView]:
    view = deployment_view(body)
    return {view.app_uid: view} if view is not None else {}


@index("", "v1", "pods", labels={APP_UID_LABEL: kopf.PRESENT})
def sim_node_executors(*, body: kopf.Body, **_: Any) -> dict[str, NodeExecutor]:
    view = pod_view(body)
    held = node_executor(view) if view is not None else None
    return {held[0]: held[1]} if held is not None else {}


def _placements(uid: str | None, body: kopf.Body) -> dict[str, NodeExecutor]:
    """The nodes an application's executors are bound for (required node affinity), each with whose they are."""
    placement = executor_placement(body) if uid else None
    if uid is None or placement is None:
        return {}
    job, nodes = placement
    return dict.fromkeys(nodes, NodeExecutor(uid, job))


@index(SPARK.group, SPARK.version, SPARK.plural)
def sim_spark_placements(*, uid: str | None, body: kopf.Body, **_: Any) -> dict[str, NodeExecutor]:
    return _placements(uid, body)


@index(FLINK.group, FLINK.version, FLINK.plural)
def sim_flink_placements(*, uid: str | None, body: kopf.Body, **_: Any) -> dict[str, NodeExecutor]:
    return _placements(uid, body)


@dataclass(frozen=True)
class _ByNode(Mapping[str, Iterable[NodeExecutor]]):
    """Several indexes by node read as one: a node's entries in all of them."""

    parts: tuple[kopf.Index[str, NodeExecutor], ...]

    def __getitem__(self, node: str) -> Iterable[NodeExecutor]:
        if not any(node in part for part in self.parts):
            raise KeyError(node)
        return [held for part in self.parts for held in part.get(node, ())]

    def __iter__(self) -> Iterator[str]:
        return iter({node for part in self.parts for node in part})

    def __len__(self) -> int:
        return len({node for part in self.parts for node in part})


@dataclass(frozen=True)
class _Caches:
    applications: tuple[kopf.Index[str, dict[str, Any]], ...]
    pods: kopf.Index[str, PodView]
    deployments: kopf.Index[str, DeploymentView]
    node_executors: kopf.Index[str, NodeExecutor]
    node_placements: _ByNode

    @classmethod
    def of(cls, indexes: Mapping[str, Any]) -> _Caches:
        """The simulator's indexes, among those kopf passes a handler."""
        return cls(
            (sim_spark_applications.of(indexes), sim_flink_deployments.of(indexes)),
            sim_pods.of(indexes),
            sim_deployments.of(indexes),
            sim_node_executors.of(indexes),
            _ByNode((sim_spark_placements.of(indexes), sim_flink_placements.of(indexes))),
        )

    def application(self, uid: str) -> dict[str, Any] | None:
        return next((app for index in self.applications for app in index.get(uid, ())), None)

    def over(self, uid: str) -> bool:
        """Whether the application of ``uid`` is over (a gone one is)."""
        app = self.application(uid)
        return app is None or is_over(app)

    def uids(self) -> set[str]:
        return {uid for index in self.applications for uid in index}


@dataclass
class CurrentTables:
    """The co-location tables as the ConfigMaps say now: one object the handlers replace ``now`` of (kopf gives
    each watched object a copy of the memo, so an attribute set on the memo itself would not reach the worker)."""

    now: Tables


# --- wiring ------------------------------------------------------------------------------------------------


_OWN_OBJECTS: Final = (("", "v1", "pods"), ("apps", "v1", "deployments"))  # each labelled APP_UID_LABEL


def select_own_objects(settings: kopf.OperatorSettings) -> None:
    """Watch only the simulated pods and Deployments and the table ConfigMaps: the API server leaves out every
    other one."""
    for kind in _OWN_OBJECTS:
        settings.watching.label_selectors[kind] = APP_UID_LABEL
    settings.watching.label_selectors["", "v1", "configmaps"] = TABLE_LABEL


@kopf.on.startup()
async def _start(settings: kopf.OperatorSettings, memo: kopf.Memo, **indexes: Any) -> None:
    settings.posting.level = logging.WARNING
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX)
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    select_own_objects(settings)
    caches = _Caches.of(indexes)
    memo.caches = caches
    memo.client = AsyncClient(field_manager=FIELD_MANAGER)
    memo.queue = WorkQueue()
    memo.listed = asyncio.Event()
    memo.tables = CurrentTables(Tables(memo.sim_settings.model))
    memo.tasks = [
        asyncio.create_task(_work(memo.client, caches, memo.queue, memo.sim_settings, memo.tables), name="sim worker"),
        asyncio.create_task(_resync(caches, memo.queue, memo.listed), name="sim resync"),
    ]


@kopf.on.cleanup()
async def _stop(memo: kopf.Memo, **_: Any) -> None:
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    await memo.client.close()


@kopf.on.event(SPARK.group, SPARK.version, SPARK.plural)
async def _spark_application_changed(*, uid: str | None, memo: kopf.Memo, **_: Any) -> None:
    memo.listed.set()
    if uid:
        memo.queue.add(uid)


@kopf.on.event(FLINK.group, FLINK.version, FLINK.plural)
async def _flink_deployment_changed(*, uid: str | None, memo: kopf.Memo, **_: Any) -> None:
    memo.listed.set()
    if uid:
        memo.queue.add(uid)


@kopf.on.event("", "v1", "pods", labels={APP_UID_LABEL: kopf.PRESENT})
async def _pod_changed(*, body: kopf.Body, labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    memo.listed.set()
    memo.queue.add(labels[APP_UID_LABEL])
    # The applications already running on an executor's node: a newcomer slows their runs down.
    view = pod_view(body)
    held = node_executor(view) if view is not None else None
    if held is not None:
        for neighbour in memo.caches.node_executors.get(held[0], ()):
            memo.queue.add(neighbour.app_uid)


@kopf.on.event("apps", "v1", "deployments", labels={APP_UID_LABEL: kopf.PRESENT})
async def _deployment_changed(*, labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    memo.listed.set()
    memo.queue.add(labels[APP_UID_LABEL])


@kopf.on.event("", "v1", "configmaps", labels={TABLE_LABEL: kopf.PRESENT})
async def _table_changed(*, type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    configmap = _snapshot(body)
    where = f"ConfigMap {body.metadata.namespace}/{body.metadata.name}"
    if type == "DELETED":
        memo.tables.now = memo.tables.now.removed(configmap)
        _log.info(f"{where} deleted: its namespace's jobs run as the default table says")
        return
    version = f"resourceVersion {configmap['metadata'].get('resourceVersion')}"
    try:
        memo.tables.now = memo.tables.now.changed(configmap)
    except ModelError as err:
        _log.warning(f"{err} ({version}); the namespace keeps the table it had")
        message = f"{err} ({version}); the table it had stays"
        await _post(memo.client, configmap, "Warning", "ColocationTableRefused", message)
        return
    message = f"co-location table in use for the runs that start from now on ({version})"
    _log.info(f"{where}: {message}")
    await _post(memo.client, configmap, "Normal", "ColocationTableInUse", message)


async def _resync(caches: _Caches, queue: WorkQueue, listed: asyncio.Event) -> None:
    await listed.wait()  # before the first event, the caches may not hold the first listing yet
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        for uid in caches.uids():
            queue.add(uid)


async def read_tables(client: AsyncClient, tables: CurrentTables) -> None:
    """The tables of the ConfigMaps there are now, read once (the watch reports those that cannot be used)."""
    configmaps = client.list(ConfigMap, namespace="*", labels={TABLE_LABEL: operators.exists()})
    async for configmap in configmaps:
        with contextlib.suppress(ModelError):
            tables.now = tables.now.changed(configmap.to_dict())


async def _work(
    client: AsyncClient, caches: _Caches, queue: WorkQueue, settings: SimSettings, tables: CurrentTables
) -> None:
    while True:
        try:
            await read_tables(client, tables)
            break
        except (ApiError, httpx2.HTTPError) as err:
            _log.warning(f"cannot list the co-location tables ({err!r}); trying again")
            await asyncio.sleep(RETRY_SECONDS)
    while True:
        uid = await queue.get()
        try:
            again = await _reconcile(client, caches, uid, settings, tables.now)
        except ApiError as err:
            _log.warning(f"application {uid}: {err.status.code} {err.status.message}; trying again")
            again = RETRY_SECONDS
        except httpx2.HTTPError as err:
            _log.warning(f"application {uid}: {err!r}; trying again")
            again = RETRY_SECONDS
        except Exception:  # a bug must not stop the simulation of every other application
            _log.exception(f"application {uid}: unexpected error; trying again")
            again = RESYNC_SECONDS
        if again is not None:
            queue.add(uid, again)


# --- one application ---------------------------------------------------------------------------------------


class _Refused(Exception):
    """A write the API server refused because the application moved on; decide again on the newer view."""


async def _reconcile(
    client: AsyncClient, caches: _Caches, uid: str, settings: SimSettings, tables: Tables
) -> float | None:
    """Decide and act for one application; seconds until it wants to be looked at again (None: on a change)."""
    app = caches.application(uid)
    if app is None or app["metadata"].get("deletionTimestamp"):
        return None  # its pods go with it (owner references)
    settings = replace(settings, model=tables.model_for(app["metadata"]["namespace"]))
    now = datetime.now(UTC)
    observation = Observation(
        app,
        list(caches.pods.get(uid, ())),
        caches.node_executors,
        now,
        deployments=list(caches.deployments.get(uid, ())),
        over=caches.over,
        node_placements=caches.node_placements,
    )
    decision = decide(observation, settings)
    try:
        rejection = await _act(client, caches, app, decision)
        if rejection is not None:
            await _act(client, caches, app, rejected(observation, rejection))
    except _Refused:
        return RETRY_SECONDS
    if decision.wake_at is not None:
        return max((decision.wake_at - datetime.now(UTC)).total_seconds(), 0.0)
    return None


async def _act(client: AsyncClient, caches: _Caches, app: dict[str, Any], decision: Decision) -> str | None:
    """Carry out ``decision``; the API server's message if it refused to create one of the objects."""
    metadata = app["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    resource = _RESOURCES[app["kind"]]
    version = metadata["resourceVersion"]
    for action in decision.actions:
        if isinstance(action, CreatePod | CreateDeployment):
            kind = Pod if isinstance(action, CreatePod) else Deployment
            refused = await _create(client, caches, metadata["uid"], kind, action.manifest)
            if refused is not None:
                return refused
        elif isinstance(action, DeletePod):
            await ignore(Refusal.NOT_FOUND, client.delete(Pod, action.name, namespace=namespace, grace_period=0))
        elif isinstance(action, EndPod):
            ended = ended_pod_status(action.pod, succeeded=action.succeeded, message=action.message, now=_now())
            await ignore(
                Refusal.NOT_FOUND, client.patch(PodStatus, action.pod.name, {"status": ended}, namespace=namespace)
            )
        elif isinstance(action, Annotate):
            patch = {"metadata": {"resourceVersion": version, "annotations": action.annotations}}
            version = await _patch_app(client, resource, name, namespace, patch)
        elif isinstance(action, WriteStatus):
            diff = merge_patch(app.get("status") or {}, action.status)
            patch = {"metadata": {"resourceVersion": version}, "status": diff}
            version = await _patch_app(client, resource.Status, name, namespace, patch)
    for event in decision.events:
        await _post(client, app, event.type, event.reason, event.message)
    return None


async def _post(client: AsyncClient, about: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
    """Post an Event about the object ``about``; one the API server refuses is logged and dropped."""
    try:
        await client.create(from_dict(_event(about, type_, reason, message)))
    except ApiError as err:  # an Event is a courtesy: never worth deciding again for
        metadata = about["metadata"]
        _log.info(f"no {reason} event for {metadata['namespace']}/{metadata['name']}: {err.status.message}")


async def _patch_app(client: AsyncClient, resource: Any, name: str, namespace: str, patch: dict[str, Any]) -> str:
    try:
        written = await client.patch(resource, name, patch, namespace=namespace, patch_type=PatchType.MERGE)
    except ApiError as err:
        if refusal(err) in (Refusal.NOT_FOUND, Refusal.CONFLICT):  # gone, or changed since the decision
            raise _Refused from err
        raise
    return str(written.metadata.resourceVersion)


async def _create(
    client: AsyncClient, caches: _Caches, uid: str, kind: type[Pod] | type[Deployment], manifest: dict[str, Any]
) -> str | None:
    """Create a pod (Deployment) unless it exists; the API server's message if it refuses the object itself."""
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    what = f"{manifest['kind'].lower()} {name}"
    try:
        await client.create(from_dict(manifest))
    except ApiError as err:
        refused = refusal(err)
        if refused.of_the_request:  # invalid, or forbidden (a missing service account, ...)
            return f"{what}: {err.status.message}"
        if refused is not Refusal.CONFLICT:
            raise
    else:
        return None
    existing = await client.get(kind, name, namespace=namespace)
    owner = (existing.metadata.labels or {}).get(APP_UID_LABEL) if existing.metadata else None
    if owner == uid:
        return None
    if owner is not None and caches.application(owner) is None:
        # Left by an earlier application of the same name (BatchJobs run again under one name) and not
        # yet collected: it is garbage already, and in the way.
        await ignore(Refusal.NOT_FOUND, client.delete(kind, name, namespace=namespace, grace_period=0))
    else:
        _log.warning(f"{what} in {namespace} exists and belongs to someone else; waiting for it to go")
    raise _Refused


def _event(app: Mapping[str, Any], type_: str, reason: str, message: str) -> dict[str, Any]:
    metadata = app["metadata"]
    now = _now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{metadata['name']}.", "namespace": metadata["namespace"]},
        "involvedObject": {
            "apiVersion": app["apiVersion"],
            "kind": app["kind"],
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": FIELD_MANAGER},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def _now() -> datetime:
    return datetime.now(UTC)
