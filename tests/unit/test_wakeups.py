"""The reconcilers' daemon loop (operators.daemons.Wakeups) and their writes (kube.writes): a daemon decides
on wake-ups (run on a virtual clock, ``tests.virtual_time``), and ends as soon as kopf asks it to stop, so kopf
never has to cancel it (and log a warning for every deleted object); a status write over a newer version than
the decision saw is a stale view, decided again at once; an object a reconciler creates is there when it exists
already, and not wanted when its namespace is being deleted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import kopf
import pytest
from kopf._cogs.aiokits.aioenums import FlagSetter
from kopf._core.intents.stoppers import DaemonStoppingReason
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import Status, StatusCause, StatusDetails

from kube.writes import StaleView, create, write_status
from operators.batchjob import TestbedView, jobs_to_wake, testbed_view
from operators.daemons import DEBOUNCE_SECONDS, Wakeups, debounce, swap_seen
from tests import virtual_time


@contextlib.asynccontextmanager
async def daemon_of(wakeups: Wakeups, decide: Callable[[], Awaitable[float | None]]) -> AsyncIterator[None]:
    """The daemon of "key" deciding with ``decide`` while the block runs; stopped (as kopf stops it when its
    object is deleted) after it, and ended at once: the resync is 30 s away, only the stop can end a wait."""
    stopper: FlagSetter[DaemonStoppingReason] = FlagSetter()
    daemon = asyncio.create_task(wakeups.run("key", stopper.async_waiter, decide, logging.getLogger("test")))
    try:
        yield
    finally:
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        stopper.set(reason=DaemonStoppingReason.RESOURCE_DELETED)
        await asyncio.wait_for(daemon, timeout=1)
        assert loop.time() == stopped_at, "the daemon ended when it was stopped"


def decisions_at(decided: list[float]) -> Callable[[], Awaitable[float | None]]:
    """A decision that records when it is made and asks to look again only when woken (or at the resync)."""

    async def decide() -> float | None:
        decided.append(asyncio.get_running_loop().time())
        return None

    return decide


# The daemons run on a virtual clock (tests.virtual_time): every time below is exact, and waits take no time.


def test_a_daemon_decides_on_each_wake_up_and_ends_when_stopped_mid_wait() -> None:
    async def scenario() -> list[float]:
        wakeups = Wakeups("thing")
        decided: list[float] = []
        async with daemon_of(wakeups, decisions_at(decided)):
            await asyncio.sleep(0.05)
            wakeups.wake(["key"])
            await asyncio.sleep(0.3)
        wakeups.wake(["key"])  # a wake-up after the end reaches nothing
        return decided

    assert virtual_time.run(scenario()) == pytest.approx([0.0, DEBOUNCE_SECONDS]), "the second after the debounce"


def test_a_wake_up_later_is_decided_then_and_one_at_once_before_it_is_not_held_back() -> None:
    async def scenario() -> list[float]:
        wakeups = Wakeups("thing")
        decided: list[float] = []
        async with daemon_of(wakeups, decisions_at(decided)):
            await asyncio.sleep(0.3)  # a quiet spell after the first decision
            wakeups.wake_later(["key"], 0.2)
            await asyncio.sleep(0.05)
            wakeups.wake(["key"], at_once=True)
            await asyncio.sleep(0.3)
        return decided

    assert virtual_time.run(scenario()) == pytest.approx([0.0, 0.35, 0.5])


def test_a_wake_up_at_once_ends_the_debounce_that_a_burst_waits_for() -> None:
    async def scenario() -> list[float]:
        wakeups = Wakeups("thing", debounce_seconds=30.0)
        decided: list[float] = []
        async with daemon_of(wakeups, decisions_at(decided)):
            await asyncio.sleep(0)  # the first decision
            wakeups.wake(["key"])  # right after a decision: waits for the debounce
            await asyncio.sleep(0.3)
            wakeups.wake(["key"], at_once=True)
            await asyncio.sleep(0.3)
        return decided

    assert virtual_time.run(scenario()) == pytest.approx([0.0, 0.3])


def test_waiting_for_a_stopped_daemon_ends_once_its_decision_in_flight_is_done() -> None:
    # A BatchJob's deletion handler waits so, to read the last status its reconciler wrote.
    async def scenario() -> tuple[float, float]:
        wakeups = Wakeups("thing")
        loop = asyncio.get_running_loop()

        async def slow_decision() -> None:
            await asyncio.sleep(0.5)

        stopper: FlagSetter[DaemonStoppingReason] = FlagSetter()
        daemon = asyncio.create_task(wakeups.run("key", stopper.async_waiter, slow_decision, logging.getLogger("t")))
        await asyncio.sleep(0.1)  # mid-decision
        stopper.set(reason=DaemonStoppingReason.RESOURCE_DELETED)
        await wakeups.ended("key", timeout=10)
        ended_at = loop.time()
        await daemon
        await wakeups.ended("key", timeout=10)  # none runs: at once
        return ended_at, loop.time()

    assert virtual_time.run(scenario()) == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize(
    ("woken_after", "wait"),
    [(5.0, 0.0), (DEBOUNCE_SECONDS, 0.0), (0.0, DEBOUNCE_SECONDS), (DEBOUNCE_SECONDS / 4, DEBOUNCE_SECONDS * 3 / 4)],
    ids=["after a quiet spell", "just at the end", "right after", "soon after"],
)
def test_a_lone_wake_up_is_decided_at_once_and_a_burst_once_per_debounce(woken_after: float, wait: float) -> None:
    assert debounce(100.0, 100.0 + woken_after) == pytest.approx(wait)


@pytest.mark.parametrize(
    ("took", "woken_after", "wait"),
    [(0.4, 0.0, 0.4), (0.4, 0.3, 0.1), (0.4, 0.5, 0.0), (DEBOUNCE_SECONDS / 2, 0.0, DEBOUNCE_SECONDS)],
    ids=["right after", "soon after", "after as long as it took", "a quick decision: the debounce"],
)
def test_a_long_decision_is_made_again_no_sooner_than_it_took(took: float, woken_after: float, wait: float) -> None:
    assert debounce(100.0, 100.0 + woken_after, took=took) == pytest.approx(wait)


async def stale_then_decided(wakeups: Wakeups, *, woken: bool) -> list[float]:
    """When a daemon whose first decision meets a stale view decides (``woken``: the newer version's event
    wakes it after the stale view)."""
    decided: list[float] = []
    stale = asyncio.Event()

    async def decide() -> float | None:
        decided.append(asyncio.get_running_loop().time())
        if len(decided) == 1:
            stale.set()
            raise StaleView("thing: resourceVersion is no longer 1")
        return None

    async with daemon_of(wakeups, decide):
        await stale.wait()
        if woken:
            wakeups.wake(["key"])
        await asyncio.sleep(1)
    return decided


def test_a_decision_on_a_stale_view_is_made_again_after_a_debounce_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="test"):
        decided = virtual_time.run(stale_then_decided(Wakeups("thing"), woken=False))
    assert decided == pytest.approx([0.0, DEBOUNCE_SECONDS])
    assert [r.levelname for r in caplog.records] == ["DEBUG"]


def test_a_decision_on_a_stale_view_is_made_again_when_the_newer_view_arrives_without_a_debounce() -> None:
    wakeups = Wakeups("thing", debounce_seconds=30.0)
    assert virtual_time.run(stale_then_decided(wakeups, woken=True)) == [0.0, 0.0]


class RefusingClient:
    """An AsyncClient whose status patches the API server answers with ``status``."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.patches: list[list[dict[str, Any]]] = []

    async def patch(self, resource: Any, name: str, patch: list[dict[str, Any]], **_: Any) -> None:
        self.patches.append(patch)
        raise ApiError(status=self.status)

    async def create(self, obj: Any) -> None:
        raise ApiError(status=self.status)


BODY = {"metadata": {"name": "job", "namespace": "ns", "resourceVersion": "7"}}
TEST_FAILED = Status(
    code=422,
    reason="Invalid",
    message="the server rejected our request due to an error in our request",
    details=StatusDetails(),
)
INVALID_STATUS = Status(
    code=422,
    reason="Invalid",
    message='BatchJob.esi.tu-berlin.de "job" is invalid: status.state',
    details=StatusDetails(causes=[StatusCause(field="status.state", reason="FieldValueNotSupported")]),
)


def write(client: RefusingClient, *, guarded: bool) -> None:
    body = cast(kopf.Body, BODY)
    asyncio.run(write_status(cast(AsyncClient, client), object(), body, {}, {"state": "Ready"}, guarded=guarded))


def test_a_guarded_write_over_a_newer_version_is_a_stale_view() -> None:
    client = RefusingClient(TEST_FAILED)
    with pytest.raises(StaleView, match="resourceVersion is no longer 7"):
        write(client, guarded=True)
    assert client.patches[0][0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}


@pytest.mark.parametrize(
    ("status", "guarded"), [(INVALID_STATUS, True), (TEST_FAILED, False)], ids=["fields named", "unguarded"]
)
def test_other_refusals_stay_api_errors(status: Status, guarded: bool) -> None:
    with pytest.raises(ApiError) as refused:
        write(RefusingClient(status), guarded=guarded)
    assert not isinstance(refused.value, StaleView)
    assert refused.value.status is status


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tb-ghost-0", "namespace": "ns"}}
NAMESPACE_TERMINATING = Status(
    code=403,
    reason="Forbidden",
    message='pods "tb-ghost-0" is forbidden: unable to create new content in namespace ns because it is being '
    "terminated",
    details=StatusDetails(
        name="tb-ghost-0",
        kind="pods",
        causes=[
            StatusCause(reason="NamespaceTerminating", field="metadata.namespace", message="namespace is terminating")
        ],
    ),
)
FORBIDDEN = Status(code=403, reason="Forbidden", message='pods "tb-ghost-0" is forbidden: User cannot create')
EXISTS = Status(code=409, reason="AlreadyExists", message='pods "tb-ghost-0" already exists')


@pytest.mark.parametrize(("status", "wanted"), [(EXISTS, True), (NAMESPACE_TERMINATING, False)])
def test_a_creation_that_exists_or_is_not_wanted_any_more_is_no_error(status: Status, wanted: bool) -> None:
    assert asyncio.run(create(cast(AsyncClient, RefusingClient(status)), POD)) is wanted


def test_other_refused_creations_stay_api_errors() -> None:
    with pytest.raises(ApiError) as refused:
        asyncio.run(create(cast(AsyncClient, RefusingClient(FORBIDDEN)), POD))
    assert refused.value.status is FORBIDDEN


def _table(*rows: tuple[int, str | None, str]) -> TestbedView:
    return testbed_view(
        {"nodeLabel": "esi.test/id", "slotsPerNode": 2},
        [
            {"id": i, "nodeName": node, "nodeId": 0, "position": 0, "state": "Reserved", "job": job}
            for i, job, node in rows
        ],
    )


def test_a_testbed_wakes_only_the_jobs_whose_rows_changed() -> None:
    before = _table((0, "a", "n0"), (1, "b", "n0"), (2, None, "n1"))

    assert jobs_to_wake(before, _table((0, "a", "n0"), (1, "b", "n0"), (2, "c", "n1"))) == {"c"}, "newly listed"
    assert jobs_to_wake(before, _table((0, "a", "n0"), (1, None, "n0"), (2, None, "n1"))) == {"b"}, "no longer"
    assert jobs_to_wake(before, _table((0, "a", "n9"), (1, "b", "n0"), (2, None, "n1"))) == {"a"}, "a row moved"
    assert jobs_to_wake(before, _table((1, "b", "n0"), (0, "a", "n0"), (2, None, "n1"))) == set(), "same rows"


def test_a_testbed_that_appears_goes_or_changes_its_spec_wakes_every_job() -> None:
    table = _table((0, "a", "n0"))
    respecified = (dict(table[0], slotsPerNode=3), table[1])

    assert jobs_to_wake(None, table) is None
    assert jobs_to_wake(table, None) is None
    assert jobs_to_wake(table, respecified) is None


def test_what_an_object_looked_like_is_swapped_for_what_it_looks_like_and_forgotten_when_it_goes() -> None:
    seen: dict[str, int] = {}
    assert swap_seen(seen, "a", 1) is None
    assert swap_seen(seen, "a", 2) == 1
    assert swap_seen(seen, "a", None) == 2
    assert seen == {}
