"""The Scheduling reconciler: holds a Scheduling's Testbed and jobs, records its slot decisions, follows it.

A thin shell around ``esi.decisions.scheduling_lifecycle.decide_scheduling``. Its caches are kopf indexes of the
Testbeds' published slot tables, the BatchJobs' states and the holds (``esi.objects.holds``); one daemon per
Scheduling decides whenever one of them changes. A ``Claim`` decision takes the holds all or nothing: it
creates every Lease it lacks and, when one is held by another Scheduling, deletes those it just created.
The reconciler is the only writer of the Scheduling's status — the durable record of every reservation.
Its finalizer lets go of the holds when the Scheduling is deleted; the BatchJobs then release themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.codecs import from_dict
from lightkube.resources.coordination_v1 import Lease
from pydantic import ValidationError

from esi.decisions.scheduling_lifecycle import (
    Claim,
    JobView,
    Release,
    SchedulingDecision,
    SchedulingObservation,
    decide_scheduling,
    holding,
    needs,
    testbed_view,
    waiting_since,
)
from esi.decisions.wait_cycles import Held, WaitCycle, wait_cycle
from esi.objects.applications import run_problem
from esi.objects.holds import HOLD_KIND_LABEL, HOLDER_UID_LABEL, Hold, HoldKind, hold_manifest, hold_name, read_hold
from esi.resources.batchjob import BatchJob, BatchJobState
from esi.resources.meta import GROUP, VERSION, state_named, utc_now
from esi.resources.scheduling import SchedulingSpec, SchedulingStatus
from esi.resources.testbed import TestbedSpec, TestbedStatus
from esi.wire.rest import field_problems
from kube.errors import Refusal, ignore, refusal
from kube.indexes import index
from kube.resources import SchedulingResource
from kube.writes import write_status
from operators.daemons import (
    CHAIN_DEBOUNCE_SECONDS,
    DAEMON_EXIT_SECONDS,
    HoldKey,
    Wakeups,
    first,
    hold_of,
    holds,
    post_events,
)

__all__: list[str] = []

Key = tuple[str, str]  # (namespace, name)
_wakeups = Wakeups("scheduling", CHAIN_DEBOUNCE_SECONDS)


# --- caches ------------------------------------------------------------------------------------------


@index(GROUP, VERSION, "testbeds")
def testbed_tables(
    *, name: str, namespace: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[Key, dict[str, Any]]:
    """Each Testbed's spec and published status (the BatchJob reconciler reads them too)."""
    return {(namespace or "", name): {"spec": dict(spec), "status": dict(status)}}


@index(GROUP, VERSION, "batchjobs")
def batchjob_states(*, name: str, namespace: str | None, status: kopf.Status, **_: Any) -> dict[Key, JobView]:
    view = JobView(
        scheduling=status.get("scheduling"),
        state=state_named(BatchJobState, status.get("state")),
        message=status.get("message"),
        attempt=status.get("attempt"),
        waiting_for=status.get("waitingFor"),
        stalled=next(
            (
                c.get("message") or ""
                for c in status.get("conditions") or ()
                if c.get("type") == "Stalled" and c.get("status") == "True"
            ),
            "",
        ),
    )
    return {(namespace or "", name): view}


@index(GROUP, VERSION, "batchjobs")
def batchjob_specs(
    *, name: str, namespace: str | None, meta: kopf.Meta, spec: kopf.Spec, **_: Any
) -> dict[Key, BatchJob | str]:
    """Each BatchJob as esi's model reads it, or why it does not (its fields at fault): whether its runs could
    start in a Testbed's slots is judged from it."""
    try:
        job: BatchJob | str = BatchJob.model_validate({"metadata": dict(meta), "spec": dict(spec)})
    except ValidationError as err:
        job = "; ".join(f"{p.field}: {p.problem}" for p in field_problems(err))
    return {(namespace or "", name): job}


@index(GROUP, VERSION, "schedulings")
def scheduling_needs(
    *, name: str, namespace: str | None, spec: kopf.Spec, status: kopf.Status, **_: Any
) -> dict[Key, tuple[frozenset[Held], datetime | None]]:
    """What each Scheduling needs to hold, and since when it waits for it (for cycles of waits)."""
    try:
        parsed = SchedulingSpec.model_validate(dict(spec))
        current = SchedulingStatus.model_validate(dict(status)) if status else None
    except ValidationError:
        return {}
    return {(namespace or "", name): (needs(parsed), waiting_since(current))}


# --- wake-ups: a change concerns the Schedulings of its namespace ------------------------------------------


def _wake_namespace(namespace: str | None) -> None:
    _wakeups.wake_where(lambda key: isinstance(key, tuple) and key[0] == (namespace or ""))


@kopf.on.event(GROUP, VERSION, "testbeds")
async def _testbed_changed(*, namespace: str | None, **_: Any) -> None:
    _wake_namespace(namespace)


@kopf.on.event(GROUP, VERSION, "batchjobs")
async def _batchjob_changed(*, namespace: str | None, **_: Any) -> None:
    _wake_namespace(namespace)


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={HOLD_KIND_LABEL: kopf.PRESENT})
async def _hold_changed(*, namespace: str | None, **_: Any) -> None:
    _wake_namespace(namespace)


@kopf.on.event(GROUP, VERSION, "schedulings")
async def _scheduling_changed(*, namespace: str | None, **_: Any) -> None:
    _wake_namespace(namespace)  # also the others: one that lets go may unblock another


# --- the reconciler -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Caches:
    testbeds: kopf.Index[Key, dict[str, Any]]
    jobs: kopf.Index[Key, JobView]
    specs: kopf.Index[Key, BatchJob | str]
    holds: kopf.Index[HoldKey, Hold]
    needs: kopf.Index[Key, tuple[frozenset[Held], datetime | None]]

    @classmethod
    def of(cls, indexes: Mapping[str, Any]) -> _Caches:
        """The indexes the Scheduling reconciler reads, among those kopf passes a handler."""
        return cls(
            testbed_tables.of(indexes),
            batchjob_states.of(indexes),
            batchjob_specs.of(indexes),
            holds.of(indexes),
            scheduling_needs.of(indexes),
        )

    def unrunnable(self, namespace: str, jobs: Iterable[str], testbed: str, spec: TestbedSpec) -> dict[str, str]:
        """Why no run of each of ``jobs`` could start in the slots of Testbed ``testbed``, for those that could not."""
        found = {}
        for job in jobs:
            read = first(self.specs.get((namespace, job)))
            why = (
                run_problem(read, testbed, spec) if isinstance(read, BatchJob) else read and f"it is not valid: {read}"
            )
            if why:
                found[job] = why
        return found

    def cycle(self, namespace: str, name: str) -> WaitCycle | None:
        """The cycle of waits among the namespace's Schedulings that Scheduling ``name`` is part of."""
        wanted, since = {}, {}
        for (found_namespace, scheduling), values in self.needs.items():
            value = first(values)
            if found_namespace == namespace and value is not None:
                wanted[scheduling], since[scheduling] = value
        holders: dict[Held, str] = {
            ("testbed" if kind == HoldKind.TESTBED else "job", held): hold.scheduling
            for (hold_namespace, kind, held), found in self.holds.items()
            if hold_namespace == namespace and (hold := first(found)) is not None
        }
        return wait_cycle(name, wanted, holders, since) if name in wanted else None


@kopf.daemon(GROUP, VERSION, "schedulings", cancellation_backoff=DAEMON_EXIT_SECONDS, cancellation_timeout=10)
async def follow_scheduling(
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
    await _wakeups.run(key, stopped, lambda: _reconcile(key, body, memo.client, caches, logger), logger)


@kopf.on.delete(GROUP, VERSION, "schedulings")
async def release(*, namespace: str | None, uid: str, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Let go of everything the Scheduling holds; its BatchJobs then remove their applications themselves."""
    client: AsyncClient = memo.client
    async for lease in client.list(Lease, namespace=namespace or "", labels={HOLDER_UID_LABEL: uid}):
        assert lease.metadata is not None
        await ignore(Refusal.NOT_FOUND, client.delete(Lease, str(lease.metadata.name), namespace=namespace or ""))
        logger.info(f"released {lease.metadata.name}")


async def _reconcile(
    key: Key, body: kopf.Body, client: AsyncClient, caches: _Caches, logger: kopf.Logger
) -> float | None:
    namespace, name = key
    if body["metadata"].get("deletionTimestamp"):
        return None  # the finalizer lets go; nothing more to decide
    uid = body["metadata"]["uid"]
    raw_status = dict(body.get("status") or {})
    try:
        spec = SchedulingSpec.model_validate(dict(body["spec"]))
        status = SchedulingStatus.model_validate(raw_status) if raw_status else None
    except ValidationError as err:  # the API server's schema lets it through; esi's stricter rules do not
        kopf.event(body, type="Warning", reason="Invalid", message=str(err))
        return None

    def held_by(kind: HoldKind, held: str) -> str | None:
        hold = hold_of(caches.holds, namespace, kind, held)
        if hold is None:
            return None
        # A hold left by an earlier Scheduling of the same name is not ours (the collector will remove it).
        return hold.scheduling if hold.scheduling_uid == uid or hold.scheduling != name else f"{name} (earlier)"

    testbed_name = spec.testbed.name
    raw_testbed = first(caches.testbeds.get((namespace, testbed_name)))
    testbed = None
    unrunnable: dict[str, str] = {}
    if raw_testbed is not None:
        table = TestbedStatus.model_validate(raw_testbed["status"]) if raw_testbed["status"] else None
        testbed = testbed_view(table, held_by(HoldKind.TESTBED, testbed_name))
        named = [held for kind, held in needs(spec) if kind == "job"]
        size = TestbedSpec.model_validate(raw_testbed["spec"])
        unrunnable = caches.unrunnable(namespace, named, testbed_name, size)
    jobs = {
        job: dataclasses.replace(view, held_by=held_by(HoldKind.BATCHJOB, job))
        for (job_namespace, job), views in caches.jobs.items()
        if job_namespace == namespace and (view := first(views)) is not None
    }
    observation = SchedulingObservation(testbed, jobs, caches.cycle(namespace, name), unrunnable)

    def decide(seen: SchedulingObservation) -> SchedulingDecision:
        generation = body["metadata"].get("generation")
        return decide_scheduling(
            spec, status, seen, name=name, namespace=namespace, generation=generation, now=utc_now()
        )

    decision = decide(observation)
    # Holds are taken before the status says they are held; the status is on record before anything is let go
    # of: letting go changes what the next decision sees (another Scheduling takes what was released, the cycle
    # of waits is gone), so a status write that met a newer version afterwards would lose why it let go.
    claim = next((action for action in decision.actions if isinstance(action, Claim)), None)
    if claim is not None and await _claim(client, claim, namespace=namespace, name=name, uid=uid, body=body):
        decision = decide(holding(observation, claim, name))
    await write_status(client, SchedulingResource.Status, body, raw_status, decision.status.to_json_dict())
    for action in decision.actions:
        if isinstance(action, Release):  # their holds go, so they are Ready for others
            let_go = [(HoldKind.BATCHJOB, job) for job in action.jobs]
            let_go += [(HoldKind.TESTBED, action.testbed)] if action.testbed is not None else []
            for kind, held in let_go:
                await ignore(Refusal.NOT_FOUND, client.delete(Lease, hold_name(kind, held), namespace=namespace))
    post_events(body, decision.events)
    return decision.decide_again_in


async def _claim(client: AsyncClient, claim: Claim, *, namespace: str, name: str, uid: str, body: kopf.Body) -> bool:
    """Hold the testbed and every job, all or nothing: on a conflict, let go of what this attempt took.
    Whether everything is held now."""
    taken: list[str] = []
    wanted = [(HoldKind.TESTBED, claim.testbed)] + [(HoldKind.BATCHJOB, job) for job in claim.jobs]
    for kind, held in wanted:
        manifest = hold_manifest(kind, held, namespace=namespace, scheduling=name, scheduling_uid=uid)
        try:
            await client.create(from_dict(manifest))
            taken.append(manifest["metadata"]["name"])
            continue
        except ApiError as err:
            if refusal(err) is not Refusal.CONFLICT:
                raise
        existing = await client.get(Lease, hold_name(kind, held), namespace=namespace)
        hold = read_hold(existing.to_dict())
        if hold is not None and hold.scheduling_uid == uid:
            continue  # ours already
        for lease in taken:
            await ignore(Refusal.NOT_FOUND, client.delete(Lease, lease, namespace=namespace))
        holder = hold.scheduling if hold is not None else "someone else"
        kopf.event(body, type="Normal", reason="Waiting", message=f"{kind.value} {held} is held by scheduling {holder}")
        return False
    return True
