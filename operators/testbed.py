"""The Testbed reconciler: keeps one ghost pod per free slot and publishes the slot table.

A thin shell around ``esi.testbed_states.decide_testbed``. kopf *indexes* are its caches (nodes, the
pods on each node, each Testbed's own pods, the reservations Schedulings recorded), so a decision never
needs an API read. One daemon per Testbed decides whenever something relevant changes (debounced) and at
least every ``RESYNC_SECONDS``; it creates and deletes ghost pods, emits Events, and is the only writer of
the Testbed's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from esi.ghosts import ghost_pod, node_view, pod_requests, pod_view
from esi.meta import utc_now
from esi.names import TESTBED_LABEL
from esi.quantity import Quantity
from esi.scheduling import JobState
from esi.testbed import TestbedSpec, TestbedState, TestbedStatus
from esi.testbed_states import (
    FINISHED_PHASES,
    CreateGhost,
    DeleteGhost,
    NodeView,
    PodView,
    Reservation,
    Resources,
    TestbedObservation,
    decide_testbed,
)
from kube import TestbedResource

__all__ = ["RESYNC_SECONDS"]

RESYNC_SECONDS = 30.0
DEBOUNCE_SECONDS = 0.1
FIELD_MANAGER = "esi-testbed-reconciler"

TestbedKey = tuple[str, str]
_wakeups: dict[TestbedKey, asyncio.Event] = {}
_STATE_REASONS = {s.value for s in TestbedState}


def _wake(keys: Iterable[TestbedKey] | None = None) -> None:
    """Ask the daemons of ``keys`` (all Testbeds when None) to decide again."""
    for key, event in list(_wakeups.items()):
        if keys is None or key in keys:
            event.set()


@kopf.on.startup()
async def _start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.level = logging.WARNING  # Events are esi's own decisions, not kopf's handler chatter
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="esi.tu-berlin.de")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="esi.tu-berlin.de")
    memo.client = AsyncClient(field_manager=FIELD_MANAGER)


@kopf.on.cleanup()
async def _stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.client.close()


# --- caches ------------------------------------------------------------------------------------------
# An index handler answers {} when an object no longer belongs in the index: kopf keeps an object's earlier
# entries when a handler returns None, so a finished pod or an ended reservation would linger.


@kopf.index("", "v1", "nodes")
def testbed_nodes(*, name: str, body: kopf.Body, **_: Any) -> dict[str, NodeView]:
    return {name: node_view(body, Resources(Quantity(0), Quantity(0)))}


@kopf.index("", "v1", "pods")
def pods_on_nodes(
    *, namespace: str | None, spec: kopf.Spec, status: kopf.Status, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[str, tuple[TestbedKey | None, Resources]]:
    """Per node, what each unfinished pod requests, and whose Testbed it belongs to (None: nobody's)."""
    node = spec.get("nodeName")
    if not node or status.get("phase") in FINISHED_PHASES:
        return {}
    owner = (namespace or "", labels[TESTBED_LABEL]) if TESTBED_LABEL in labels else None
    return {node: (owner, pod_requests(body))}


@kopf.index("", "v1", "pods", labels={TESTBED_LABEL: kopf.PRESENT})
def testbed_pods(*, namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[TestbedKey, PodView]:
    view = pod_view(body)
    return {} if view is None else {(namespace or "", labels[TESTBED_LABEL]): view}


_RESERVING = (JobState.RESERVED.value, JobState.SUBMITTED.value, JobState.RUNNING.value)


@kopf.index("esi.tu-berlin.de", "v1alpha1", "schedulings")
def reservations(
    *, name: str, namespace: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[TestbedKey, tuple[Reservation, ...]]:
    testbed = (spec.get("testbed") or {}).get("name")
    if not testbed:
        return {}
    held = [
        Reservation(name, job["name"], tuple(job.get("slots", [])))
        for job in status.get("jobs", [])
        if job.get("state") in _RESERVING and job.get("slots")
    ]
    # An index holds one value per key and object; several jobs of one Scheduling go in as a tuple.
    return {(namespace or "", testbed): tuple(held)} if held else {}


# --- wake-ups ------------------------------------------------------------------------------------------


@kopf.on.event("", "v1", "nodes")
def _node_changed(**_: Any) -> None:
    _wake()


@kopf.on.event("", "v1", "pods")
def _pod_changed(*, namespace: str | None, labels: kopf.Labels, **_: Any) -> None:
    # A Testbed's own pod concerns that Testbed; any other pod may change what a node has left for slots.
    _wake([(namespace or "", labels[TESTBED_LABEL])] if TESTBED_LABEL in labels else None)


@kopf.on.event("esi.tu-berlin.de", "v1alpha1", "schedulings")
def _scheduling_changed(*, namespace: str | None, spec: kopf.Spec, **_: Any) -> None:
    _wake([(namespace or "", (spec.get("testbed") or {}).get("name", ""))])


# --- the reconciler -------------------------------------------------------------------------------------


@kopf.daemon("esi.tu-berlin.de", "v1alpha1", "testbeds", cancellation_timeout=10)
async def keep_slots(
    *,
    name: str,
    namespace: str | None,
    body: kopf.Body,
    stopped: kopf.DaemonStopped,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **indexes: Any,  # kopf passes every index by its handler's name
) -> None:
    key = (namespace or "", name)
    caches = _Caches(
        indexes["testbed_nodes"], indexes["pods_on_nodes"], indexes["testbed_pods"], indexes["reservations"]
    )
    wake = _wakeups.setdefault(key, asyncio.Event())
    try:
        while not stopped:
            wake.clear()
            try:
                await _reconcile(key, body, memo.client, caches)
            except ApiError as err:  # retried on the next wake-up or resync
                logger.warning(f"testbed {namespace}/{name}: {err.status.message}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=RESYNC_SECONDS)
            await asyncio.sleep(DEBOUNCE_SECONDS)
    finally:
        _wakeups.pop(key, None)


@dataclasses.dataclass(frozen=True)
class _Caches:
    nodes: Mapping[str, Iterable[NodeView]]
    pods_on_nodes: Mapping[str, Iterable[tuple[TestbedKey | None, Resources]]]
    own_pods: Mapping[TestbedKey, Iterable[PodView]]
    reserved: Mapping[TestbedKey, Iterable[tuple[Reservation, ...]]]


async def _reconcile(key: TestbedKey, body: kopf.Body, client: AsyncClient, caches: _Caches) -> None:
    namespace, name = key
    spec = TestbedSpec.model_validate(dict(body["spec"]))
    raw_status = dict(body.get("status") or {})
    status = TestbedStatus.model_validate(raw_status) if raw_status else None
    node_views = [
        dataclasses.replace(view, other_requests=_others(caches.pods_on_nodes.get(view.name, ()), key))
        for store in caches.nodes.values()
        for view in store
    ]
    held = [reservation for group in caches.reserved.get(key, ()) for reservation in group]
    decision = decide_testbed(
        spec,
        status,
        TestbedObservation(node_views, list(caches.own_pods.get(key, ())), held),
        generation=body["metadata"].get("generation"),
        now=utc_now(),
    )
    for action in decision.actions:
        if isinstance(action, DeleteGhost):
            await _ignore(404, client.delete(Pod, action.pod, namespace=namespace, grace_period=0))
        elif isinstance(action, CreateGhost):
            manifest = ghost_pod(name, body["metadata"]["uid"], namespace, action)
            await _ignore(409, client.create(from_dict(manifest)))
    for reason, message in decision.events:
        kopf.event(body, type="Normal" if reason in _STATE_REASONS else "Warning", reason=reason, message=message)
    new_status = decision.status.to_json_dict()
    if new_status != raw_status:
        # One JSON-patch op replaces the whole status: a merge patch could not drop fields that went away.
        replace = [{"op": "add", "path": "/status", "value": new_status}]
        await client.patch(TestbedResource.Status, name, replace, namespace=namespace, patch_type=PatchType.JSON)


def _others(entries: Iterable[tuple[TestbedKey | None, Resources]], key: TestbedKey) -> Resources:
    cpu, memory = Quantity(0), Quantity(0)
    for owner, requests in entries:
        if owner != key:
            cpu, memory = cpu + requests.cpu, memory + requests.memory
    return Resources(cpu, memory)


async def _ignore(code: int, call: Any) -> None:
    try:
        await call
    except ApiError as err:
        if err.status.code != code:
            raise
