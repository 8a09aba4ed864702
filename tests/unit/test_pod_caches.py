"""The reconcilers' caches of pods (operators.pods): what a pod gives an index replaces what it gave before, a
relist replaces everything, hooks hear of a pod after the indexes took it in, and a reconciler waits for the
first list — or for its stop, whichever comes first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kopf._cogs.aiokits.aioenums import FlagSetter
from kopf._core.intents.stoppers import DaemonStoppingReason

from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_GHOST, ROLE_LABEL, TESTBED_LABEL
from operators.batchjob import executors_on_nodes
from operators.pods import PodIndex, Pods, RawPod
from operators.testbed import pods_on_nodes, testbed_pods
from tests import virtual_time


def pod(name: str, *, node: str | None = None, phase: str = "Pending", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase},
    }


def by_node(p: RawPod) -> Mapping[str, str]:
    node = p["spec"].get("nodeName")
    return {node: p["metadata"]["name"]} if node else {}


def test_a_pods_values_replace_what_it_gave_before_and_go_when_it_gives_none() -> None:
    index = PodIndex(by_node)

    index.put(pod("a", node="n1"))
    index.put(pod("b", node="n1"))
    index.put(pod("a", node="n2"))  # moved (as a pod cannot, but an index must not care)
    assert {key: sorted(values) for key, values in index.items()} == {"n1": ["b"], "n2": ["a"]}

    index.put(pod("b"))  # gives no key now
    index.drop(("ns", "a"))
    assert dict(index) == {}
    assert index.get("n1", ()) == ()


def test_a_relist_replaces_every_index_and_tells_the_hooks_that_anything_may_have_changed() -> None:
    pods = Pods()
    index = pods.index(by_node)
    told: list[str | None] = []
    pods.on_change(lambda p, _: told.append(None if p is None else f"{p['metadata']['name']}@{len(index)}"))

    pods.listed([pod("a", node="n1"), pod("b", node="n2")])
    pods.observed(pod("c", node="n3"))  # the indexes have it before the hooks hear of it
    pods.listed([pod("b", node="n2")])  # a and c went while nobody watched
    pods.deleted(pod("b", node="n2"))

    assert told == [None, "c@3", None, "b@0"]
    assert dict(index) == {}


def test_a_reconciler_waits_for_the_first_list_or_its_stop() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        pods = Pods()
        stopper: FlagSetter[DaemonStoppingReason] = FlagSetter()
        waiting = asyncio.create_task(pods.wait_listed(stopper.async_waiter))
        await asyncio.sleep(0.05)
        still_waiting = not waiting.done()
        pods.listed([])
        listed = await asyncio.wait_for(waiting, timeout=1)

        stopped_first = Pods()
        stopper.set(reason=DaemonStoppingReason.RESOURCE_DELETED)
        return still_waiting, listed, await asyncio.wait_for(stopped_first.wait_listed(stopper.async_waiter), 1)

    assert virtual_time.run(scenario()) == (True, True, False)


def test_the_reconcilers_indexes_read_a_pod_as_the_api_server_sent_it() -> None:
    ghost = pod("g", node="n1", phase="Running", **{ROLE_LABEL: ROLE_GHOST, TESTBED_LABEL: "tb"})
    executor = pod("e", node="n1", phase="Running", **{ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: "tb", JOB_LABEL: "j"})
    foreign = pod("f", node="n1", phase="Running")
    finished = pod("x", node="n1", phase="Succeeded", **{ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: "j"})

    assert [owner for owner, _ in pods_on_nodes.contributes(foreign).values()] == [None]
    assert [owner for owner, _ in pods_on_nodes.contributes(ghost).values()] == [("ns", "tb")]
    assert pods_on_nodes.contributes(finished) == {}
    assert set(testbed_pods.contributes(ghost)) == {("ns", "tb")}
    assert testbed_pods.contributes(foreign) == {}
    assert executors_on_nodes.contributes(executor) == {"n1": ("ns", "j")}
    assert executors_on_nodes.contributes(finished) == {}
    assert executors_on_nodes.contributes(pod("p", **{ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: "j"})) == {}
