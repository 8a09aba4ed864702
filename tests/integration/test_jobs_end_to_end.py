"""Jobs end to end: a Scheduling holds its Testbed and BatchJobs, reserves slots, the BatchJobs create their
applications, the simulated Spark/Flink operator creates executor pods, the real second kube-scheduler puts
each into its slot through esi's extender, the applications run and end, and the Scheduling completes.

The whole local stack runs as processes (``esi_stack``): reconcilers, simulated operator, API, scheduler.
The original's scenarios 1-2 and 7-12 (docs/compatibility.md#scenarios) are re-expressed here against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SLOT_ANNOTATION
from infra.local_cluster import LocalCluster
from tests.integration.conftest import STALLED_AFTER, AddNodes, ensure_operators, kill_operators
from tests.integration.esi_objects import new_testbed_on_nodes, ready_with_ghosts, spark_job
from tests.integration.kube import Watcher, create_in, create_testbed, get, running_on, status, wait_for
from tests.integration.kube import pod as plain_pod
from tests.manifests import FLINK, batchjob_manifest, scheduling_manifest, testbed_manifest
from tests.original_manifests import WORDCOUNT_CLASS, original_flink_job, original_queue_scheduling

START_TIMEOUT = 60  # seconds: spec.retry.startTimeoutSeconds of a test's Scheduling that waits for it
# How long a Scheduling of simulated jobs may take to complete: seconds when the machine is quiet; the bound is
# for a 2-core machine that also runs real JVMs (test_real_spark.py) beside these tests.
COMPLETION = 300


def scheduling(cluster: LocalCluster, namespace: str, name: str, jobs: list[str], **spec: Any) -> None:
    manifest = scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": j} for j in jobs], **spec)
    create_in(cluster, namespace, manifest | {"metadata": {"name": name}})


def job_records(cluster: LocalCluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in status(cluster, namespace, "scheduling", name).get("jobs", [])}


def completed(cluster: LocalCluster, namespace: str, name: str) -> Callable[[], bool]:
    return lambda: status(cluster, namespace, "scheduling", name).get("state") == "Completed"


class ExecutorRecorder(Watcher[Pod]):
    """Every executor pod of a namespace as it was seen running: (job, slot, node), by pod name."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.seen: dict[str, tuple[str, int, str]] = {}
        super().__init__(cluster, namespace, Pod, labels={ROLE_LABEL: ROLE_EXECUTOR})

    def note(self, pod: Pod) -> None:
        if pod.metadata is None or pod.spec is None or pod.status is None or pod.status.phase != "Running":
            return
        job, slot = (pod.metadata.labels or {})[JOB_LABEL], (pod.metadata.annotations or {})[SLOT_ANNOTATION]
        self.seen[str(pod.metadata.name)] = (job, int(slot), str(pod.spec.nodeName))


@pytest.fixture
def executors(cluster: LocalCluster, namespace: str) -> Iterator[ExecutorRecorder]:
    recorder = ExecutorRecorder(cluster, namespace)
    yield recorder
    recorder.stop()


def check_every_executor_in_its_slot(
    cluster: LocalCluster, namespace: str, recorder: ExecutorRecorder, reserved: dict[str, set[int]]
) -> None:
    """Each executor seen ran in a slot reserved for its job, on that slot's node; no slot twice at once."""
    table = {s["id"]: s["nodeName"] for s in status(cluster, namespace, "testbed", "tb")["slots"]}
    assert recorder.seen, "no executor was seen running"
    for pod, (job, slot, node) in recorder.seen.items():
        assert slot in reserved[job], f"{pod} of {job} ran in slot {slot}, reserved {sorted(reserved[job])}"
        assert node == table[slot], f"{pod} in slot {slot} ran on {node}, the slot is on {table[slot]}"


def test_a_spark_job_runs_in_its_slots_then_is_released(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:  # original 2
    nodes = new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "wordcount")
    scheduling(esi_stack, namespace, "s", ["wordcount", "wordcount"])

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    record = job_records(esi_stack, namespace, "s")["wordcount"]
    assert (record["state"], sorted(record["slots"])) == ("Succeeded", [0, 1])
    job = status(esi_stack, namespace, "batchjob", "wordcount")
    assert (job["state"], job["scheduling"]) == ("Succeeded", "s")
    (run,) = job["runs"]
    assert (run["scheduling"], run["testbed"], sorted(run["slots"]), run["outcome"]) == ("s", "tb", [0, 1], "Succeeded")
    assert sorted(run["nodes"]) == nodes, "slots 0 and 1 are the first slot of each node"
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {"wordcount": {0, 1}})

    esi_stack.kubectl("delete", "-n", namespace, "scheduling", "s", "--wait=true", "--timeout=60s")
    wait_for(
        "the job Ready again, its application gone",
        lambda: (
            status(esi_stack, namespace, "batchjob", "wordcount").get("state") == "Ready"
            and not get(esi_stack, namespace, "sparkapplication", "wordcount")
        ),
        timeout=60,
    )
    assert esi_stack.kubectl("get", "-n", namespace, "leases", "-o", "name").strip() == "", "no hold left"
    wait_for("testbed Ready with 4 ghosts", ready_with_ghosts(esi_stack, namespace, 4), timeout=60)


def test_a_flink_job_runs_in_its_slots(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:  # original 1
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    # The Flink job names its service account, which must exist (as on a real cluster).
    create_in(esi_stack, namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "flink"}})
    create_in(esi_stack, namespace, batchjob_manifest(sparkSpec=None, flinkSpec=FLINK) | {"metadata": {"name": "wc"}})
    scheduling(esi_stack, namespace, "s", ["wc"] * 4)

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    job = status(esi_stack, namespace, "batchjob", "wc")
    assert (job["state"], job["runs"][0]["outcome"]) == ("Succeeded", "Succeeded"), job.get("message")
    assert sorted(job["runs"][0]["slots"]) == [0, 1, 2, 3]
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {"wc": {0, 1, 2, 3}})


def test_the_originals_manifests_run_as_they_are(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:  # docs/compatibility.md#manifests
    # The original's own Testbeds have 896 MiB slots, where Flink's default memory split starts no TaskManager:
    # esi fits it (taskmanager.memory.managed.size).
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes, memory="896Mi")
    # The FlinkDeployment runs as the Flink operator's job account, which must exist (as on a real cluster).
    create_in(esi_stack, namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "flink"}})
    create_in(esi_stack, namespace, original_flink_job("batchjob-flink"))
    queue = [{"name": "batchjob-flink", "namespace": namespace}] * 2
    testbed = {"name": "tb", "namespace": namespace}
    create_in(esi_stack, namespace, original_queue_scheduling("test-scheduling", testbed, queue))

    def flink_deployment() -> dict[str, Any] | None:
        return get(esi_stack, namespace, "flinkdeployment", "batchjob-flink").get("spec")

    deployment = wait_for("the FlinkDeployment", flink_deployment, timeout=COMPLETION)
    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "test-scheduling"), timeout=COMPLETION)
    job = status(esi_stack, namespace, "batchjob", "batchjob-flink")
    assert (job["state"], job["runs"][0]["outcome"]) == ("Succeeded", "Succeeded"), job.get("message")
    assert sorted(job["runs"][0]["slots"]) == [0, 1]
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {"batchjob-flink": {0, 1}})
    wait_for("the finished run's FlinkDeployment to be deleted", lambda: flink_deployment() is None)
    assert deployment["job"]["jarURI"] == "local:///opt/flink/examples/streaming/WordCount.jar"
    assert deployment["job"]["entryClass"] == WORDCOUNT_CLASS
    assert deployment["taskManager"]["resource"]["memory"] == "896m"
    assert deployment["flinkConfiguration"]["taskmanager.memory.managed.size"] == "64m"
    row = esi_stack.kubectl("get", "sched", "test-scheduling", "-n", namespace, "--no-headers").split()
    assert row[:4] == ["test-scheduling", "Completed", "tb", "1/1"], "kubectl shows the Testbed named as slots"


def test_a_driver_no_node_can_take_is_what_the_job_says_it_waits_for(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "huge-driver", **{"spark.driver.memory": "4000g"})
    scheduling(esi_stack, namespace, "s", ["huge-driver"])

    def told() -> str | None:
        message = status(esi_stack, namespace, "batchjob", "huge-driver").get("message") or ""
        return message if "unschedulable" in message else None

    message = wait_for("the job to say why nothing is placed", told, timeout=60)
    assert message.startswith("0 of 1 executors placed; driver huge-driver-driver unschedulable: 0/"), message
    assert "Insufficient memory" in message, message


def condition(cluster: LocalCluster, namespace: str, kind: str, name: str, type_: str) -> dict[str, Any]:
    found = [c for c in status(cluster, namespace, kind, name).get("conditions", []) if c["type"] == type_]
    return found[0] if found else {}


def test_an_executor_no_node_takes_is_told_becomes_a_stall_and_times_out_giving_its_slots_back(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes, count=1)
    # A user's mistake: Spark puts this selector on every executor, and no node has the label.
    spark_job(esi_stack, namespace, "misplaced", **{"spark.kubernetes.executor.node.selector.esi.test/nowhere": "x"})
    scheduling(esi_stack, namespace, "s", ["misplaced"], retry={"limit": 0, "startTimeoutSeconds": START_TIMEOUT})

    def job_waits() -> str | None:
        return status(esi_stack, namespace, "batchjob", "misplaced").get("waitingFor") or None

    told = wait_for("the job to say what holds it up", job_waits, timeout=60)
    assert told.startswith("executor misplaced-"), told
    assert "unschedulable: 0/" in told, told
    assert "didn't match Pod's node affinity/selector" in told, "the scheduler's own words"

    def scheduling_tells_of_the_job() -> str | None:
        waits = status(esi_stack, namespace, "scheduling", "s").get("waitingFor") or ""
        return waits if waits.startswith("job misplaced:") else None

    waits = wait_for("the Scheduling to say so", scheduling_tells_of_the_job, timeout=60)
    assert waits.startswith("job misplaced: executor misplaced-"), waits
    table = esi_stack.kubectl("get", "-n", namespace, "batchjob", "misplaced")
    assert "didn't match Pod's node affinity/selector" in table, f"kubectl get shows it:\n{table}"

    def stall() -> dict[str, Any] | None:
        found = condition(esi_stack, namespace, "scheduling", "s", "Stalled")
        return found if found.get("status") == "True" else None

    stalled = wait_for("the wait to become a stall", stall, timeout=STALLED_AFTER + 60)
    assert stalled["message"].startswith(f"job misplaced not running {STALLED_AFTER} s after submission: executor")
    job_stalled = condition(esi_stack, namespace, "batchjob", "misplaced", "Stalled")
    assert (job_stalled["status"], job_stalled["reason"]) == ("True", "WaitingTooLong"), job_stalled
    warnings = esi_stack.kubectl(
        "get", "events", "-n", namespace, "--field-selector=type=Warning,reason=Stalled", "-o", "json"
    )
    said = {e["involvedObject"]["kind"]: e["message"] for e in json.loads(warnings)["items"]}
    assert set(said) == {"BatchJob", "Scheduling"}, said
    assert "didn't match Pod's node affinity/selector" in said["BatchJob"], said

    # The start timeout fails the run with the reason, its executor goes and the slot gets its ghost back.
    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=START_TIMEOUT + 90)
    job = status(esi_stack, namespace, "batchjob", "misplaced")
    assert job["state"] == "Failed"
    assert job["message"].startswith("not running 1 min after submission: executor misplaced-"), job["message"]
    assert [r["outcome"] for r in job["runs"]] == ["Failed"]
    assert condition(esi_stack, namespace, "scheduling", "s", "Stalled")["status"] == "False"
    assert condition(esi_stack, namespace, "batchjob", "misplaced", "Stalled")["status"] == "False"
    assert "waitingFor" not in job
    wait_for("both slots free with their ghosts again", ready_with_ghosts(esi_stack, namespace, 2), timeout=60)


def test_dedicated_nodes_hold_slots_once_the_testbed_tolerates_their_taints(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/e2e-{unique}"
    nodes = [add_nodes(1, cpu="2", labels={label: str(i)})[0] for i in range(2)]
    taints = [f"dedicated={unique}:NoSchedule", f"dedicated={unique}:NoExecute"]
    for node in nodes:  # as cluster operators dedicate nodes: nothing else goes there, nothing else stays
        esi_stack.kubectl("taint", "node", node, *taints)
    create_testbed(esi_stack, namespace, label)

    def degraded() -> dict[str, Any] | None:
        table = status(esi_stack, namespace, "testbed", "tb")
        return table if table.get("state") == "Degraded" else None

    table = wait_for("the Testbed to say its nodes are tainted", degraded, timeout=60)
    assert table["counts"]["slots"] == 0, "no slot where no executor could go"
    healthy = condition(esi_stack, namespace, "testbed", "tb", "Healthy")
    told = [
        f"node {node} offers no slots: its taints dedicated={unique}:NoSchedule, dedicated={unique}:NoExecute are "
        "not tolerated (spec.tolerations)"
        for node in nodes
    ]
    assert (healthy["status"], healthy["reason"]) == ("False", "NodeTainted"), healthy
    assert all(t in healthy["message"] for t in told), healthy
    warnings = esi_stack.kubectl(
        "get", "events", "-n", namespace, "--field-selector=type=Warning,reason=NodeTainted", "-o", "json"
    )
    assert sorted(e["message"] for e in json.loads(warnings)["items"]) == sorted(told)

    tolerations = [{"key": "dedicated", "operator": "Equal", "value": unique}]  # every effect
    esi_stack.kubectl(
        "patch",
        "-n",
        namespace,
        "testbed",
        "tb",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"tolerations": tolerations}}),
    )
    wait_for("the Testbed Ready on its dedicated nodes", ready_with_ghosts(esi_stack, namespace, 4), timeout=60)
    ghosts = json.loads(esi_stack.kubectl("get", "pods", "-n", namespace, "-l", f"{ROLE_LABEL}=ghost", "-o", "json"))[
        "items"
    ]
    assert sorted(g["spec"]["nodeName"] for g in ghosts) == sorted(nodes * 2)
    assert all(tolerations[0] in g["spec"]["tolerations"] for g in ghosts), "a NoExecute taint would evict them"

    spark_job(esi_stack, namespace, "dedicated")
    scheduling(esi_stack, namespace, "s", ["dedicated", "dedicated"])
    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    runs = status(esi_stack, namespace, "batchjob", "dedicated")["runs"]
    assert [r["outcome"] for r in runs] == ["Succeeded"], runs
    assert all(set(r["nodes"]) <= set(nodes) and r["nodes"] for r in runs), (runs, nodes)


def test_queued_jobs_interleave_and_a_later_job_waits_for_room(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:  # original 7, 8, 10, 11
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    for job in ("j1", "j2", "j3", "j4"):
        spark_job(esi_stack, namespace, job)
    scheduling(esi_stack, namespace, "s", ["j2", "j1", "j2", "j1", "j3", "j3", "j3", "j4", "j4"])

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=240)
    records = job_records(esi_stack, namespace, "s")
    assert sorted(records["j2"]["slots"]) == [0, 2], "consecutive entries go to different nodes"
    assert sorted(records["j1"]["slots"]) == [1, 3]
    assert len(records["j3"]["slots"]) == 3
    assert len(records["j4"]["slots"]) == 2
    assert all(r["state"] == "Succeeded" for r in records.values())
    started = {name: r["reservedAt"] for name, r in records.items()}  # RFC 3339 in UTC: compare as text
    finished = {name: r["finishedAt"] for name, r in records.items()}
    assert started["j3"] >= max(finished["j1"], finished["j2"]), "j3 needs 3 slots: it waits for both"
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {n: set(r["slots"]) for n, r in records.items()})


def test_a_job_waits_while_other_pods_hold_a_slots_room_says_so_and_runs_once_they_go(
    esi_stack: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    executors: ExecutorRecorder,
) -> None:
    """A node the Testbed shares, where another pod holds the room of one of its two slots: the job needing
    both waits, its Scheduling naming the slot, and runs once the pod is gone."""
    label = f"esi.test/e2e-{unique}"
    (node,) = add_nodes(1, cpu="2", labels={label: "0"})
    client.create(plain_pod("squatter", namespace, cpu="1", node_name=node))
    wait_for("the other pod to run", running_on(client, "squatter", namespace))
    create_testbed(esi_stack, namespace, label)
    spark_job(esi_stack, namespace, "wordcount")
    scheduling(esi_stack, namespace, "s", ["wordcount", "wordcount"])

    waiting = wait_for(
        "the Scheduling to say what it waits for",
        lambda: "room" in (why := status(esi_stack, namespace, "scheduling", "s").get("waitingFor") or "") and why,
        timeout=60,
    )
    assert waiting == (
        "slots for job wordcount (it needs 2, 1 of the testbed's slots are free; "
        "other pods hold the room of slot 1 (see the testbed's slots))"
    )
    assert job_records(esi_stack, namespace, "s")["wordcount"]["state"] == "Waiting"

    client.delete(Pod, "squatter", namespace=namespace)

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    assert sorted(job_records(esi_stack, namespace, "s")["wordcount"]["slots"]) == [0, 1]
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {"wordcount": {0, 1}})


def test_a_second_scheduling_waits_for_a_shared_job_and_runs_after_the_first_is_deleted(
    esi_stack: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:  # original 9
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    for job in ("shared", "own"):
        spark_job(esi_stack, namespace, job)
    scheduling(esi_stack, namespace, "first", ["shared"])
    wait_for("the first to complete", completed(esi_stack, namespace, "first"), timeout=COMPLETION)
    scheduling(esi_stack, namespace, "second", ["shared", "own"])

    waiting = wait_for(
        "the second to say what it waits for",
        lambda: status(esi_stack, namespace, "scheduling", "second").get("waitingFor"),
        timeout=30,
    )
    assert "held by scheduling first" in waiting
    assert status(esi_stack, namespace, "scheduling", "second")["state"] == "Pending"
    holds = {lease.metadata.name for lease in client.list(Lease, namespace=namespace) if lease.metadata}
    assert "batchjob.own" not in holds, "nothing is held by a Scheduling that cannot hold everything"

    esi_stack.kubectl("delete", "-n", namespace, "scheduling", "first", "--wait=true", "--timeout=60s")
    wait_for("the second to complete", completed(esi_stack, namespace, "second"), timeout=COMPLETION)
    runs = status(esi_stack, namespace, "batchjob", "shared")["runs"]
    assert [r["scheduling"] for r in runs] == ["first", "second"]


def test_schedulings_given_each_others_jobs_find_the_cycle_and_the_later_one_lets_go(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    for testbed in ("tb1", "tb2"):
        label = f"esi.test/{testbed}-{unique}"
        add_nodes(1, cpu="2", labels={label: "0"})
        manifest = testbed_manifest(nodeLabel=label, slotsPerNode=2, resourcesPerSlot={"cpu": "1", "memory": "1Gi"})
        create_in(esi_stack, namespace, manifest | {"metadata": {"name": testbed}})
    for job in ("x", "y"):
        spark_job(esi_stack, namespace, job)
    for name, testbed, job in (("a", "tb1", "x"), ("b", "tb2", "y")):
        manifest = scheduling_manifest(testbed={"name": testbed}, queueBased=[{"name": job}])
        create_in(esi_stack, namespace, manifest | {"metadata": {"name": name}})
    for name in ("a", "b"):
        wait_for(f"{name} to complete", completed(esi_stack, namespace, name), timeout=COMPLETION)

    def given(name: str, jobs: list[str]) -> None:
        queue = json.dumps({"spec": {"queueBased": [{"name": j} for j in jobs]}})
        esi_stack.kubectl("patch", "-n", namespace, "scheduling", name, "--type=merge", "-p", queue)
        wait_for(f"{name} to wait", lambda: status(esi_stack, namespace, "scheduling", name)["state"] == "Pending")

    given("a", ["x", "y"])  # a now waits for y, which b holds
    given("b", ["y", "x"])  # and b for x, which a holds: a cycle, b joined it last

    def deadlocked(name: str) -> dict[str, Any]:
        return condition(esi_stack, namespace, "scheduling", name, "Deadlocked")

    told = wait_for("b told of the cycle", lambda: deadlocked("b") if deadlocked("b").get("status") == "True" else None)
    assert told["reason"] == "WaitCycle", told
    assert told["message"] == (
        "schedulings b -> a -> b wait on each other (b needs job x held by a, a needs job y held by b); "
        "b joined the cycle last and lets go of job y as soon as no run of its uses it"
    )
    warnings = esi_stack.kubectl(
        "get", "events", "-n", namespace, "--field-selector=type=Warning,reason=WaitCycle", "-o", "json"
    )
    assert [e["involvedObject"]["name"] for e in json.loads(warnings)["items"]] == ["b"]
    wait_for("a to run y and complete", completed(esi_stack, namespace, "a"), timeout=COMPLETION)
    waiting = status(esi_stack, namespace, "scheduling", "b")["waitingFor"]
    assert waiting == "job y (held by scheduling a); job x (held by scheduling a) to be released"
    assert deadlocked("b")["status"] == "True", "b still says why it let go of y"
    assert deadlocked("a")["status"] == "False", deadlocked("a")

    esi_stack.kubectl("delete", "-n", namespace, "scheduling", "a", "--wait=true", "--timeout=60s")
    wait_for("b to complete", completed(esi_stack, namespace, "b"), timeout=COMPLETION)
    runs = {job: [r["scheduling"] for r in status(esi_stack, namespace, "batchjob", job)["runs"]] for job in "xy"}
    assert runs == {"x": ["a", "b"], "y": ["b", "a"]}, "y ran in a once b let go of it"
    assert deadlocked("b")["status"] == "False", deadlocked("b")


def test_a_failed_run_is_retried_and_a_job_that_keeps_failing_is_recorded(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, "flaky", **{"spark.esi.sim.failAttempts": "1"})
    spark_job(esi_stack, namespace, "broken", **{"spark.esi.sim.failAttempts": "99"})
    spark_job(esi_stack, namespace, "steady")
    scheduling(esi_stack, namespace, "s", ["flaky", "broken", "steady"], retry={"limit": 1, "backoffSeconds": 1})

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=180)
    records = job_records(esi_stack, namespace, "s")
    assert {n: (r["state"], r["attempt"]) for n, r in records.items()} == {
        "flaky": ("Succeeded", 2),
        "broken": ("Failed", 2),
        "steady": ("Succeeded", 1),
    }
    flaky = status(esi_stack, namespace, "batchjob", "flaky")["runs"]
    assert [(r["attempt"], r["outcome"]) for r in flaky] == [(1, "Failed"), (2, "Succeeded")]
    condition = next(
        c for c in status(esi_stack, namespace, "scheduling", "s")["conditions"] if c["type"] == "Completed"
    )
    assert (condition["reason"], condition["message"]) == ("JobsFailed", "failed: broken")


def test_the_operators_killed_mid_scheduling_converge_without_losing_or_repeating_a_job(
    esi_stack: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    jobs = [f"j{k}" for k in range(6)]
    for job in jobs:
        spark_job(esi_stack, namespace, job)
    scheduling(esi_stack, namespace, "s", [job for job in jobs for _ in range(2)])

    wait_for(
        "the first jobs to start",
        lambda: any(r["state"] != "Waiting" for r in job_records(esi_stack, namespace, "s").values()),
        timeout=60,
    )
    kill_operators(esi_stack)
    try:
        time.sleep(3)  # applications run on (the simulator is not the operators) while nobody reconciles
    finally:
        ensure_operators(esi_stack)

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=180)
    for job in jobs:
        runs = status(esi_stack, namespace, "batchjob", job)["runs"]
        assert [r["outcome"] for r in runs] == ["Succeeded"], f"{job} ran {len(runs)} times: {runs}"
    esi_stack.kubectl("delete", "-n", namespace, "scheduling", "s", "--wait=true", "--timeout=60s")
    wait_for(
        "every job Ready again",
        lambda: all(status(esi_stack, namespace, "batchjob", j).get("state") == "Ready" for j in jobs),
        timeout=60,
    )
    assert list(client.list(Lease, namespace=namespace)) == [], "no hold leaked"
    wait_for("testbed Ready with 4 ghosts, no slot leaked", ready_with_ghosts(esi_stack, namespace, 4), timeout=60)


def test_a_twenty_job_queue_completes_with_every_executor_in_its_slot(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes, 4)
    jobs = [f"q{k:02d}" for k in range(20)]
    for job in jobs:
        spark_job(esi_stack, namespace, job)
    scheduling(esi_stack, namespace, "s", [job for job in jobs for _ in range(2)])

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=300)
    records = job_records(esi_stack, namespace, "s")
    assert {n: r["state"] for n, r in records.items()} == dict.fromkeys(jobs, "Succeeded")
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {n: set(r["slots"]) for n, r in records.items()})
    assert {job for job, _, _ in executors.seen.values()} == set(jobs), "an executor of every job was seen running"
    assert len(executors.seen) == 40, "two executors per job, each seen running"


def test_online_edits_of_a_running_scheduling_take_effect(
    esi_stack: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes, 1)  # two slots: one job at a time
    long = "batchjob-sample3"  # the co-location table makes it the long one (444 s x the session's time scale)
    for job in (long, "removed", "appended"):
        spark_job(esi_stack, namespace, job)
    scheduling(esi_stack, namespace, "s", [long, long, "removed", "removed"])
    wait_for(
        f"{long} to run",
        lambda: job_records(esi_stack, namespace, "s").get(long, {}).get("state") in ("Submitted", "Running"),
        timeout=60,
    )
    assert job_records(esi_stack, namespace, "s")["removed"]["state"] == "Waiting"

    queue = [{"name": j} for j in (long, long, "appended", "appended")]
    esi_stack.kubectl(
        "patch", "-n", namespace, "scheduling", "s", "--type=merge", "-p", json.dumps({"spec": {"queueBased": queue}})
    )

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    records = job_records(esi_stack, namespace, "s")
    assert {n: r["state"] for n, r in records.items()} == {long: "Succeeded", "appended": "Succeeded"}
    removed = status(esi_stack, namespace, "batchjob", "removed")
    assert (removed.get("state"), removed.get("runs", [])) == ("Ready", []), "let go, never run"
    holds = {lease.metadata.name for lease in client.list(Lease, namespace=namespace) if lease.metadata}
    assert "batchjob.removed" not in holds


def test_a_scheduling_deleted_while_the_operators_are_down_is_released_when_they_return(
    esi_stack: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    long = "batchjob-sample3"  # long enough to be running when the Scheduling goes
    spark_job(esi_stack, namespace, long)
    scheduling(esi_stack, namespace, "s", [long, long])
    wait_for(
        f"{long} to run",
        lambda: status(esi_stack, namespace, "batchjob", long).get("state") in ("Scheduled", "Running"),
        timeout=60,
    )

    kill_operators(esi_stack)
    try:
        esi_stack.kubectl("delete", "-n", namespace, "scheduling", "s", "--wait=false")
        time.sleep(2)
        assert get(esi_stack, namespace, "scheduling", "s"), "its finalizer keeps it until it has let go"
    finally:
        ensure_operators(esi_stack)

    wait_for("the Scheduling to be gone", lambda: not get(esi_stack, namespace, "scheduling", "s"), timeout=60)
    wait_for(
        "the job Ready again, its application gone",
        lambda: (
            status(esi_stack, namespace, "batchjob", long).get("state") == "Ready"
            and not get(esi_stack, namespace, "sparkapplication", long)
        ),
        timeout=90,
    )
    assert list(client.list(Lease, namespace=namespace)) == [], "no hold left"
    runs = status(esi_stack, namespace, "batchjob", long)["runs"]
    # One run: cancelled by the release, or finished first if it outran the operators' restart.
    assert [r["outcome"] for r in runs] in (["Cancelled"], ["Succeeded"])
    wait_for("testbed Ready with 4 ghosts", ready_with_ghosts(esi_stack, namespace, 4), timeout=60)


def test_slot_lists_run_each_job_on_exactly_its_slots(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, executors: ExecutorRecorder
) -> None:  # slot-based, relaxed lets a job whose slots are free start past a waiting one
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    for job in ("a", "b", "c"):
        spark_job(esi_stack, namespace, job)
    lists = {"a": [0, 1], "b": [0, 2], "c": [3]}
    slot_based = {"mode": "relaxed", "jobs": [{"name": {"name": j}, "slotIds": ids} for j, ids in lists.items()]}
    manifest = scheduling_manifest(testbed={"name": "tb"}, queueBased=None, slotBased=slot_based)
    create_in(esi_stack, namespace, manifest | {"metadata": {"name": "s"}})

    wait_for("the Scheduling to complete", completed(esi_stack, namespace, "s"), timeout=COMPLETION)
    records = job_records(esi_stack, namespace, "s")
    assert {n: (r["state"], sorted(r["slots"])) for n, r in records.items()} == {
        n: ("Succeeded", ids) for n, ids in lists.items()
    }
    assert records["c"]["reservedAt"] <= records["b"]["reservedAt"], "c did not wait behind b"
    assert records["b"]["reservedAt"] >= records["a"]["finishedAt"], "b waited for slot 0"
    check_every_executor_in_its_slot(esi_stack, namespace, executors, {n: set(ids) for n, ids in lists.items()})


def test_an_application_that_cannot_be_built_fails_its_scheduling_before_any_run(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/e2e-{unique}"
    add_nodes(1, cpu="2", labels={label: "0"})
    # 1G = 10^9 bytes is no whole number of MiB: no Spark executor can request exactly that.
    manifest = testbed_manifest(nodeLabel=label, slotsPerNode=2, resourcesPerSlot={"cpu": "1", "memory": "1G"})
    create_in(esi_stack, namespace, manifest | {"metadata": {"name": "tb"}})
    wait_for("testbed Ready", ready_with_ghosts(esi_stack, namespace, 2), timeout=60)
    spark_job(esi_stack, namespace, "odd")
    scheduling(esi_stack, namespace, "s", ["odd"], retry={"limit": 0})

    failed = wait_for(
        "the Scheduling Failed", lambda: (s := status(esi_stack, namespace, "scheduling", "s")).get("state")
        == "Failed" and s, timeout=60
    )  # fmt: skip
    placeable = next(c for c in failed["conditions"] if c["type"] == "Placeable")
    assert (placeable["status"], placeable["reason"]) == ("False", "Unplaceable")
    assert placeable["message"].startswith("job odd can never run in testbed tb's slots: ")
    assert "resourcesPerSlot.memory" in placeable["message"]
    assert status(esi_stack, namespace, "batchjob", "odd").get("runs", []) == [], "no run was started"
    assert not get(esi_stack, namespace, "sparkapplication", "odd"), "nothing half-built was created"
