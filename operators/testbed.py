"""The Testbed reconciler: keeps one ghost pod per free slot and publishes the slot table.

A thin shell around ``esi.decisions.testbed_lifecycle.decide_testbed``. Its caches are kopf *indexes* (nodes, the
reservations Schedulings recorded) and ``operators.pods``' indexes (the pods on each node, each Testbed's own
pods), so a decision never needs an API read. One daemon per Testbed decides whenever something relevant
changes (debounced) and at least every ``RESYNC_SECONDS``; it creates and deletes ghost pods, emits Events, and
is the only writer of the Testbed's status.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from esi.decisions.layout import offers_slots, testbeds_of_node
from esi.decisions.testbed_lifecycle import (
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
from esi.objects.ghosts import ghost_pod, node_view, pod_requests, pod_view
from esi.objects.holds import HOLD_KIND_LABEL, Hold, HoldKind, read_hold
from esi.objects.names import TESTBED_LABEL, testbed_of
from esi.resources.meta import GROUP, VERSION, state_named, utc_now
from esi.resources.quantity import Quantity
from esi.resources.scheduling import JobState, testbed_name
from esi.resources.testbed import TestbedSpec, TestbedStatus
from kube.errors import Refusal, ignore
from kube.indexes import index
from kube.resources import TestbedResource
from kube.writes import create, write_status
from operators.daemons import (
    DAEMON_EXIT_SECONDS,
    DEBOUNCE_SECONDS,
    HoldKey,
    Wakeups,
    first,
    hold_of,
    holds,
    post_events,
    swap_seen,
)
from operators.pods import PODS, PodIndex, RawPod, labels_of, namespace_of

__all__: list[str] = []

TestbedKey = tuple[str, str]
_ZERO = Quantity(0)  # immutable: one for every sum
_wakeups = Wakeups("testbed")


# --- caches ------------------------------------------------------------------------------------------


@index("", "v1", "nodes")
def testbed_nodes(*, name: str, body: kopf.Body, **_: Any) -> dict[str, NodeView]:
    return {name: node_view(body, Resources(_ZERO, _ZERO))}


@PODS.index
def pods_on_nodes(pod: RawPod) -> dict[str, tuple[TestbedKey | None, Resources]]:
    """Per node, what each unfinished pod requests, and whose Testbed it belongs to (None: nobody's)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
        return {}
    testbed = testbed_of(labels_of(pod))
    return {node: (None if testbed is None else (namespace_of(pod), testbed), pod_requests(pod))}


@PODS.index
def testbed_pods(pod: RawPod) -> dict[TestbedKey, PodView]:
    testbed = labels_of(pod).get(TESTBED_LABEL)
    view = None if testbed is None else pod_view(pod)
    return {} if testbed is None or view is None else {(namespace_of(pod), testbed): view}


def _reserved(
    name: str, namespace: str | None, spec: kopf.Spec, status: kopf.Status
) -> dict[TestbedKey, tuple[Reservation, ...]]:
    """The slots Scheduling ``name`` holds for its jobs, under its Testbed's key (nothing: none)."""
    testbed = testbed_name(spec)
    if not testbed:
        return {}
    held = [
        Reservation(name, job["name"], tuple(job.get("slots", [])), started=not state.queued)
        for job in status.get("jobs", [])
        if (state := state_named(JobState, job.get("state"))) is not None and state.holds_slots and job.get("slots")
    ]
    # An index holds one value per key and object; several jobs of one Scheduling go in as a tuple.
    return {(namespace or "", testbed): tuple(held)} if held else {}


@index(GROUP, VERSION, "schedulings")
def reservations(
    *, name: str, namespace: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[TestbedKey, tuple[Reservation, ...]]:
    return _reserved(name, namespace, spec, status)


@index(GROUP, VERSION, "testbeds")
def testbeds_by_label(*, name: str, namespace: str | None, spec: kopf.Spec, **_: Any) -> dict[str, TestbedKey]:
    label = spec.get("nodeLabel")
    return {str(label): (namespace or "", name)} if label else {}


# --- wake-ups ------------------------------------------------------------------------------------------

# Each node as it last woke its Testbeds: its heartbeats change nothing a Testbed reads of it.
_woken_by: dict[str, NodeView] = {}
# Each Scheduling's reservations as they last woke its Testbed: the rest of it (kopf's finalizer, what it
# reports of its jobs) is nothing a Testbed reads.
_reservations_woken_by: dict[TestbedKey, dict[TestbedKey, tuple[Reservation, ...]]] = {}


@kopf.on.event("", "v1", "nodes")
async def _node_changed(*, name: str, type: str | None, body: kopf.Body, **indexes: Any) -> None:
    # A node concerns the Testbeds whose label it has or had, when what they read of it changed.
    now = None if type == "DELETED" else node_view(body, Resources(_ZERO, _ZERO))
    was = swap_seen(_woken_by, name, now)
    if now != was:
        labels = {**(was.labels if was else {}), **(now.labels if now else {})}
        _wakeups.wake(testbeds_of_node(labels, testbeds_by_label.of(indexes)))


@PODS.on_change
def _pod_changed(pod: RawPod | None, indexes: Mapping[str, Any]) -> None:
    # A Testbed's own pod concerns that Testbed; another pod, the Testbeds of the node it is bound to (what that
    # node has left for slots). A pod not bound takes no node's room. All pods listed again: every Testbed.
    if pod is None:
        _wakeups.wake()
        return
    labels = labels_of(pod)
    if TESTBED_LABEL in labels:
        _wakeups.wake([(namespace_of(pod), labels[TESTBED_LABEL])])
    elif node := (pod.get("spec") or {}).get("nodeName"):
        view = first(testbed_nodes.of(indexes).get(str(node)))
        _wakeups.wake(None if view is None else testbeds_of_node(view.labels, testbeds_by_label.of(indexes)))


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={HOLD_KIND_LABEL: HoldKind.TESTBED.value})
async def _testbed_hold_changed(*, namespace: str | None, body: kopf.Body, **_: Any) -> None:
    # Later: a new holder's reservations follow in a moment and wake the Testbed at once — one decision and one
    # status write for both, on the way from a Scheduling to its running job.
    hold = read_hold(body)
    if hold is not None:
        _wakeups.wake_later([(namespace or "", hold.held)], DEBOUNCE_SECONDS)


@kopf.on.event(GROUP, VERSION, "schedulings")
async def _scheduling_changed(
    *, name: str, namespace: str | None, type: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> None:
    # Its reservations are on the way from a Scheduling to its running job: they wake its Testbed at once.
    now = None if type == "DELETED" else _reserved(name, namespace, spec, status)
    was = swap_seen(_reservations_woken_by, (namespace or "", name), now)
    if now != was:
        _wakeups.wake({*(was or {}), *(now or {})}, at_once=True)


# --- the reconciler -------------------------------------------------------------------------------------


@kopf.daemon(GROUP, VERSION, "testbeds", cancellation_backoff=DAEMON_EXIT_SECONDS, cancellation_timeout=10)
async def keep_slots(
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
    if await PODS.wait_listed(stopped):
        await _wakeups.run(key, stopped, lambda: _reconcile(key, body, memo.client, caches, logger), logger)


@dataclasses.dataclass(frozen=True)
class _Caches:
    nodes: kopf.Index[str, NodeView]
    pods_on_nodes: PodIndex[str, tuple[TestbedKey | None, Resources]]
    own_pods: PodIndex[TestbedKey, PodView]
    reserved: kopf.Index[TestbedKey, tuple[Reservation, ...]]
    holds: kopf.Index[HoldKey, Hold]

    @classmethod
    def of(cls, indexes: Mapping[str, Any]) -> _Caches:
        """The indexes the Testbed reconciler reads, among those kopf passes a handler."""
        return cls(
            testbed_nodes.of(indexes),
            pods_on_nodes,
            testbed_pods,
            reservations.of(indexes),
            holds.of(indexes),
        )


async def _reconcile(
    key: TestbedKey, body: kopf.Body, client: AsyncClient, caches: _Caches, logger: kopf.Logger
) -> float | None:
    namespace, name = key
    spec = TestbedSpec.model_validate(dict(body["spec"]))
    raw_status = dict(body.get("status") or {})
    status = TestbedStatus.model_validate(raw_status) if raw_status else None
    node_views = [  # a node without the Testbed's label is no part of it: no sums for it
        dataclasses.replace(view, other_requests=_others(caches.pods_on_nodes.get(view.name, ()), key))
        for store in caches.nodes.values()
        for view in store
        if offers_slots(view.labels, spec.node_label)
    ]
    held = [reservation for group in caches.reserved.get(key, ()) for reservation in group]
    holder = hold_of(caches.holds, namespace, HoldKind.TESTBED, name)
    decision = decide_testbed(
        spec,
        status,
        TestbedObservation(
            node_views, list(caches.own_pods.get(key, ())), held, held_by=None if holder is None else holder.scheduling
        ),
        generation=body["metadata"].get("generation"),
        now=utc_now(),
    )
    for action in decision.actions:
        if isinstance(action, DeleteGhost):
            await ignore(Refusal.NOT_FOUND, client.delete(Pod, action.pod, namespace=namespace, grace_period=0))
            logger.info(f"testbed {namespace}/{name}: deleted ghost pod {action.pod}: {action.reason}")
        elif isinstance(action, CreateGhost) and not await create(
            client, ghost_pod(name, body["metadata"]["uid"], namespace, action, spec.tolerations or ())
        ):
            return None  # the namespace is being deleted, and the Testbed with it
    await write_status(client, TestbedResource.Status, body, raw_status, decision.status.to_json_dict(), guarded=False)
    post_events(body, decision.events)
    return decision.decide_again_in


def _others(entries: Iterable[tuple[TestbedKey | None, Resources]], key: TestbedKey) -> Resources:
    cpu, memory = _ZERO, _ZERO
    for owner, requests in entries:
        if owner != key:
            cpu, memory = cpu + requests.cpu, memory + requests.memory
    return Resources(cpu, memory)
