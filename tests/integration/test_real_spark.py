"""SparkPi for real, end to end: the real Spark operator submits, a real driver creates real executors, and esi's
second scheduler and extender put each into its reserved slot on a real node, in place of a real ghost.

A cluster of its own, not the session's: the session installs the simulated operator's permissive
SparkApplication CRD under the real one's name, and ``python -m sim`` handles applications in every namespace.
Here run the real operator's CRDs, esi's CRDs and priority classes, esi's reconcilers, API (with the
extender) and second scheduler, the real Spark operator for one namespace, and one real node (2 cpu, 3.5Gi:
two 500m / 1Gi slots and the driver) labelled for a Testbed, with the Spark image imported.

The BatchJob is what a user of the local cluster writes: the image, the driver's account and size, and the
API server's address for the driver (``spark.kubernetes.driver.master``: there is no ``kubernetes`` Service
behind a kube-proxy here). The image's entry point makes the driver reachable at its pod IP (no cluster DNS).

Also: executors that fail are replaced into the job's slots until Spark gives up; a second real node, and two
jobs each with a slot on both nodes, co-located for real.

The simulator's conformance: beside the real operator, ``python -m sim`` handles a namespace of its own, with
a KWOK node as big as the real one; the same BatchJob, an executor lost mid-run in both, and what esi depends
on (pods' names, labels, owners, sizes and placement, the application's states) must be the same.

The tests share the module's cluster: they are one xdist group (``make test`` distributes by group), or
pytest-xdist would give each of them a cluster of its own on another worker.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Pod

from esi.objects.applications import SPARK
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_GHOST, ROLE_LABEL, SLOT_ANNOTATION
from infra import images
from infra.images.spark import EXAMPLES_JAR, SPARK_PI_CLASS, spark_image, spark_version
from infra.local_cluster import LocalCluster, NodeSpec
from infra.local_cluster.real_node import RealNode, RealNodeSpec, pod_api_server_url
from infra.local_cluster.real_node import unavailable_reason as real_nodes_unavailable
from infra.stacks.spark_operator import DRIVER_SERVICE_ACCOUNT, driver_rbac, start_operator
from infra.stacks.spark_operator import unavailable_reason as spark_operator_unavailable
from sim.crds import FLINK, application_crds
from sim.pods import SPARK_APP_SELECTOR_LABEL
from tests.conftest import report_failures_in
from tests.integration.kube import create_in, get_or_none, wait_for
from tests.integration.real_stack import (
    PodHistory,
    PodLife,
    RealStack,
    Run,
    Side,
    ensure_testbed,
    esi_with_a_real_node,
    pod_shape,
    real_ghosts,
    simulator_beside,
    status_in,
)
from tests.manifests import batchjob_manifest, scheduling_manifest, testbed_manifest

if (reason := real_nodes_unavailable() or spark_operator_unavailable()) is not None:
    pytest.skip(f"SparkPi on a real node: {reason}", allow_module_level=True)

pytestmark = pytest.mark.xdist_group("real-spark")

NAMESPACE = "spark-jobs"
NODE = "real-spark"
NODE_LABEL = "esi.test/real-testbed"
SLOT = {"cpu": "500m", "memory": "1Gi"}


RealSpark = RealStack


def _spark_operator_for(namespace: str) -> Callable[[LocalCluster], None]:
    def start(cluster: LocalCluster) -> None:
        rbac = {"apiVersion": "v1", "kind": "List", "items": driver_rbac(namespace)}
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(rbac))
        start_operator(cluster, [namespace])  # with the real SparkApplication CRD

    return start


@pytest.fixture(scope="module")
def real_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSpark]:
    cluster = LocalCluster("real-spark", workdir=tmp_path_factory.mktemp("real-spark") / "kwok")
    node = RealNodeSpec(NODE, cpu="2", memory="3584Mi", labels={NODE_LABEL: "0"})
    with esi_with_a_real_node(cluster, NAMESPACE, node, spark_image, _spark_operator_for(NAMESPACE)) as stack:
        yield stack


@pytest.fixture
def history(real_spark: RealSpark, request: pytest.FixtureRequest) -> Iterator[PodHistory]:
    report_failures_in(request.node, real_spark.cluster, NAMESPACE)
    watcher = PodHistory(real_spark.cluster, NAMESPACE)
    yield watcher
    watcher.stop()


def status(cluster: LocalCluster, kind: str, name: str) -> dict[str, Any]:
    return status_in(cluster, NAMESPACE, kind, name)


def running_tasks(node: RealNode) -> str:
    """The containers the node's containerd runs (``ctr tasks ls``)."""
    ctr = [images.CTR, "-a", str(node.containerd_socket), "-n", images.CRI_NAMESPACE, "tasks", "ls"]
    return subprocess.run(ctr, capture_output=True, text=True, check=True).stdout


def sleeping_pod(name: str, image: str, requests: dict[str, str]) -> dict[str, Any]:
    """A pod for the default scheduler, bound for the real node, asking for ``requests``; its container sleeps."""
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "args": ["sleep", "600"],
        "resources": {"requests": requests, "limits": requests},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        },
    }


def default_scheduler_baseline(spark: RealSpark, history: PodHistory) -> float:
    """Seconds from creating two slot-sized pods with the Spark image, placed by the default scheduler on the
    real node, until both run; they are deleted again."""
    names = ["baseline-0", "baseline-1"]
    start = time.monotonic()
    for name in names:
        create_in(spark.cluster, NAMESPACE, sleeping_pod(name, spark.image, SLOT))
    wait_for("the baseline pods to run", lambda: all(history.pods.get(n, PodLife({}, 0)).running for n in names))
    took = max(history.pods[n].running or 0 for n in names) - start
    spark.cluster.kubectl("delete", "-n", NAMESPACE, "pod", *names, "--wait=false")
    wait_for(
        "the baseline pods to be gone", lambda: all(get_or_none(spark.client, Pod, n, NAMESPACE) is None for n in names)
    )
    return took


def unschedulable(spark: RealSpark, name: str) -> Callable[[], str | None]:
    """A probe: why the scheduler leaves the pod without a node, once it says so."""

    def probe() -> str | None:
        pod = spark.client.get(Pod, name, namespace=NAMESPACE)
        assert pod.spec is not None
        assert not pod.spec.nodeName, f"{name} was placed on {pod.spec.nodeName}"
        for condition in (pod.status and pod.status.conditions) or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                return condition.message or "Unschedulable"
        return None

    return probe


def sparkpi_job(
    spark: RealSpark,
    name: str,
    main_class: str = SPARK_PI_CLASS,
    arguments: Sequence[str] = ("2",),
    driver_node: str | None = None,
) -> dict[str, Any]:
    """A Spark BatchJob as a user of the local cluster writes it; its driver on ``driver_node`` if given."""
    spec: dict[str, Any] = {
        "type": "Scala",
        "mode": "cluster",
        "sparkVersion": spark_version(),
        "image": spark.image,
        "imagePullPolicy": "Never",  # imported into the node: no registry is reachable
        "mainClass": main_class,
        "mainApplicationFile": f"local:///opt/spark/{EXAMPLES_JAR}",
        "arguments": list(arguments),
        # The driver's JVM is held to half a core (a cpu limit), as the executors are by their slots: the 2-core
        # machine runs the rest of the suite beside it.
        "driver": {
            "serviceAccount": DRIVER_SERVICE_ACCOUNT,
            "cores": 1,
            "coreRequest": "500m",
            "coreLimit": "500m",
            "memory": "512m",
        },
        # No kube-proxy here: the driver reaches the API server at the address pods can reach.
        "sparkConf": {"spark.kubernetes.driver.master": pod_api_server_url(spark.cluster)},
    }
    if driver_node is not None:  # Spark's own setting: spec.driver.nodeSelector takes the operator's webhook
        spec["sparkConf"]["spark.kubernetes.driver.node.selector.kubernetes.io/hostname"] = driver_node
    manifest: dict[str, Any] = batchjob_manifest(sparkSpec=spec) | {"metadata": {"name": name}}
    return manifest


def scheduling(name: str, jobs: list[str], **spec: Any) -> dict[str, Any]:
    manifest = scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": j} for j in jobs], **spec)
    body: dict[str, Any] = manifest | {"metadata": {"name": name}}
    return body


def completed(cluster: LocalCluster, name: str, namespace: str = NAMESPACE) -> Callable[[], bool]:
    return lambda: status_in(cluster, namespace, "scheduling", name).get("state") == "Completed"


def driver_log(node: RealNode, pod: str) -> str:
    return "".join(p.read_text() for p in sorted(node.pod_logs.glob(f"{NAMESPACE}_{pod}_*/*/*.log")))


def free_the_real_node(cluster: LocalCluster) -> None:
    """What the tests before left on the first real node goes: their Schedulings, and Testbed ``tb`` with its
    ghosts (deleted by the garbage collector after it)."""
    cluster.kubectl("delete", "-n", NAMESPACE, "schedulings", "--all", "--wait=true", "--timeout=90s")
    cluster.kubectl("delete", "-n", NAMESPACE, "testbed", "tb", "--ignore-not-found", "--wait=true", "--timeout=90s")


def test_sparkpi_runs_in_its_slots_on_a_real_node_and_a_failing_driver_is_retried(
    real_spark: RealSpark, history: PodHistory, record_property: Callable[[str, object], None]
) -> None:
    spark, cluster = real_spark, real_spark.cluster
    baseline = default_scheduler_baseline(spark, history)

    # A Testbed of two slots on the real node: its ghosts are pause containers the kubelet runs.
    testbed = testbed_manifest(nodeLabel=NODE_LABEL, slotsPerNode=2, resourcesPerSlot=SLOT)
    create_in(cluster, NAMESPACE, testbed | {"metadata": {"name": "tb"}})
    ghosts = wait_for("the Testbed Ready with two running ghosts", lambda: real_ghosts(spark, NAMESPACE), timeout=90)
    tasks = running_tasks(spark.node)
    for ghost in spark.client.list(Pod, namespace=NAMESPACE, labels={ROLE_LABEL: ROLE_GHOST}):
        assert ghost.status is not None
        assert str((ghost.status.containerStatuses or [])[0].containerID).removeprefix("containerd://") in tasks

    # An ordinary pod cannot take the reserved room: the default scheduler finds none, and cannot evict a ghost.
    more_than_is_free = {"cpu": "1500m", "memory": "64Mi"}
    create_in(cluster, NAMESPACE, sleeping_pod("ordinary", spark.image, more_than_is_free))
    why = wait_for("the ordinary pod to be refused a node", unschedulable(spark, "ordinary"))
    assert "Insufficient cpu" in why, why
    assert real_ghosts(spark, NAMESPACE) == ghosts, "no ghost was deleted for it"
    cluster.kubectl("delete", "-n", NAMESPACE, "pod", "ordinary", "--wait=true")

    create_in(cluster, NAMESPACE, sparkpi_job(spark, "sparkpi"))
    start = time.monotonic()
    create_in(cluster, NAMESPACE, scheduling("pi", ["sparkpi", "sparkpi"]))
    wait_for("the Scheduling to complete", completed(cluster, "pi"), timeout=300)

    record = {j["name"]: j for j in status(cluster, "scheduling", "pi")["jobs"]}["sparkpi"]
    job = status(cluster, "batchjob", "sparkpi")
    assert (record["state"], sorted(record["slots"])) == ("Succeeded", [0, 1]), job.get("message")
    (run,) = job["runs"]
    assert (run["outcome"], sorted(run["slots"]), run["nodes"]) == ("Succeeded", [0, 1], [NODE]), run
    executors = history.with_role(ROLE_EXECUTOR)
    assert len(executors) == 2, sorted(history.pods)
    assert {e.labels[JOB_LABEL] for e in executors.values()} == {"sparkpi"}
    assert sorted((e.slot for e in executors.values()), key=str) == [0, 1], "one executor in each slot"
    assert all(e.node == NODE and e.running for e in executors.values()), executors
    assert history.refused() == {}, "the kubelet admitted every pod"
    assert "Pi is roughly 3.1" in driver_log(spark.node, "sparkpi-driver")

    # The executors are gone: the slots hold new ghosts, running again.
    returned = wait_for("real ghosts back in both slots", lambda: real_ghosts(spark, NAMESPACE), timeout=90)
    assert set(returned.values()).isdisjoint(ghosts.values()), "each ghost was deleted for an executor"

    created = min(e.created for e in executors.values())
    placed = max(e.running or 0 for e in executors.values())
    record_property(
        "figure",
        f"  Scheduling created -> both executors running in their slots: {placed - start:.1f} s\n"
        f"    of which operator + spark-submit + driver until the executor pods exist: {created - start:.1f} s,\n"
        f"    executor pods created -> running (second scheduler, extender, ghost deletion, kubelet): "
        f"{placed - created:.1f} s\n"
        f"  the same two pods placed by the default scheduler on the same node -> running: {baseline:.1f} s\n"
        f"  placement and start, esi / default scheduler: x{(placed - created) / baseline:.1f}",
    )

    # A driver that fails (its main class does not exist): the run fails with the operator's reason and is
    # retried per the Scheduling's spec.retry, on fresh slots; the Scheduling still completes.
    cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", "pi", "--wait=true", "--timeout=60s")
    create_in(cluster, NAMESPACE, sparkpi_job(spark, "nopi", main_class="org.apache.spark.examples.NoSuchPi"))
    create_in(cluster, NAMESPACE, scheduling("broken", ["nopi", "nopi"], retry={"limit": 1, "backoffSeconds": 1}))
    wait_for("the broken Scheduling to complete", completed(cluster, "broken"), timeout=300)

    record = {j["name"]: j for j in status(cluster, "scheduling", "broken")["jobs"]}["nopi"]
    assert (record["state"], record["attempt"]) == ("Failed", 2), record
    runs = status(cluster, "batchjob", "nopi")["runs"]
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "Failed"), (2, "Failed")], runs
    assert "driver container failed" in record["message"], record["message"]
    condition = next(c for c in status(cluster, "scheduling", "broken")["conditions"] if c["type"] == "Completed")
    assert (condition["reason"], condition["message"]) == ("JobsFailed", "failed: nopi")
    assert "NoSuchPi" in driver_log(spark.node, "nopi-driver")
    assert history.refused() == {}, "the kubelet admitted every pod"
    # A completed Scheduling holds its Testbed until it is deleted: leave the Testbed to the next test.
    cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", "broken", "--wait=true", "--timeout=60s")


def test_a_failing_executor_is_replaced_until_spark_gives_up_and_the_run_is_retried(
    real_spark: RealSpark, history: PodHistory, record_property: Callable[[str, object], None]
) -> None:
    """Executors whose container fails at once (no Java where their environment says): each failed one is
    replaced into its slot (the kubelet admits every one), until Spark's driver gives up; the run fails with
    the reason and is retried per the Scheduling's spec.retry."""
    spark, cluster = real_spark, real_spark.cluster
    ensure_testbed(spark.cluster, REAL, SLOT)
    job = sparkpi_job(spark, "badexec")
    job["spec"]["sparkSpec"]["sparkConf"] |= {
        "spark.executorEnv.JAVA_HOME": "/no/such/java",
        "spark.executor.maxNumFailures": "2",
    }
    create_in(cluster, NAMESPACE, job)
    create_in(cluster, NAMESPACE, scheduling("doomed", ["badexec", "badexec"], retry={"limit": 1, "backoffSeconds": 1}))
    start = time.monotonic()
    try:
        # Each run starts a driver's JVM and replaces failing executors until the driver gives up: minutes on a
        # loaded machine, so each run has a bound of its own.
        def a_run_ended() -> bool:
            return any(run.get("outcome") for run in status(cluster, "batchjob", "badexec").get("runs", []))

        wait_for("the first run to fail", a_run_ended, timeout=300)
        first_failed = time.monotonic()
        wait_for("the retry to fail and the doomed Scheduling to complete", completed(cluster, "doomed"), timeout=300)
        completed_at = time.monotonic()
        # Before the Scheduling goes, and the application and its driver with it.
        record = {j["name"]: j for j in status(cluster, "scheduling", "doomed")["jobs"]}["badexec"]
        log = driver_log(spark.node, "badexec-driver")
    finally:
        cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", "doomed", "--wait=true", "--timeout=60s")

    runs = status(cluster, "batchjob", "badexec")["runs"]
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "Failed"), (2, "Failed")], runs
    assert "driver container failed" in record["message"], record["message"]
    executors = [life for life in history.with_role(ROLE_EXECUTOR).values() if life.labels[JOB_LABEL] == "badexec"]
    # Spark's driver gives up once more executors failed than spark.executor.maxNumFailures (2) and replaces each
    # failed one meanwhile: every run made at least three.
    per_run = Counter(e.labels[SPARK_APP_SELECTOR_LABEL] for e in executors)
    assert len(per_run) == 2, f"the executors of two runs: {per_run}"
    assert min(per_run.values()) >= 3, f"failed executors were replaced until Spark gave up: {per_run}"
    assert {e.slot for e in executors} == {0, 1}, "every executor in one of the job's slots"
    assert history.refused() == {}, "the kubelet admitted every pod but ghosts (PodHistory.refused says why)"
    # A ghost the kubelet refused was made again: both slots are held by running ghosts once the job is gone.
    wait_for("real ghosts back in both slots", lambda: real_ghosts(spark, NAMESPACE), timeout=90)
    assert "Max number of executor failures" in log, log[-2000:]
    record_property(
        "figure",
        f"  Scheduling created -> first run failed: {first_failed - start:.1f} s, -> retry failed and the Scheduling"
        f" completed: {completed_at - start:.1f} s; executor pods made by the two runs: {sorted(per_run.values())}",
    )


def test_a_job_waits_while_a_pod_holds_a_slots_room_on_the_real_node_and_runs_once_it_goes(
    real_spark: RealSpark, history: PodHistory
) -> None:
    """The real node shared: a pod the default scheduler placed before the Testbed leaves room for one of its two
    slots. That slot says so and gets no ghost; a SparkPi needing both slots waits, its Scheduling naming the
    slot, and no driver is started. Once the pod is gone the slot gets its ghost back, and the job runs in both
    slots — the real kubelet admitting every pod."""
    spark, cluster = real_spark, real_spark.cluster
    free_the_real_node(cluster)
    # 1500m of the node's 2 cpu: room for one 500m slot (it runs once the former Testbed's ghosts are gone).
    create_in(cluster, NAMESPACE, sleeping_pod("holder", spark.image, {"cpu": "1500m", "memory": "64Mi"}))
    try:
        wait_for(
            "the other pod to run on the real node",
            lambda: history.pods.get("holder", PodLife({}, 0)).running,
            timeout=120,
        )

        testbed = testbed_manifest(nodeLabel=NODE_LABEL, slotsPerNode=2, resourcesPerSlot=SLOT)
        create_in(cluster, NAMESPACE, testbed | {"metadata": {"name": "tb"}})

        def slot_without_room() -> dict[str, Any] | None:
            table = status(cluster, "testbed", "tb")
            ghosts = {s["id"] for s in table.get("slots", []) if s.get("pod")}
            without = [s for s in table.get("slots", []) if s.get("noRoom")]
            return without[0] if len(without) == 1 and len(ghosts) == 1 else None

        lacking = wait_for("one slot with a ghost, the other without room", slot_without_room, timeout=90)
        assert lacking["noRoom"].startswith(f"other pods on node {NODE} request 1500m cpu and 64Mi memory"), lacking
        assert lacking["noRoom"].endswith("room for 1 of its 2 slots"), lacking
        ghosts = spark.client.list(Pod, namespace=NAMESPACE, labels={ROLE_LABEL: ROLE_GHOST})
        held = {(g.metadata.annotations or {}).get(SLOT_ANNOTATION) for g in ghosts if g.metadata}
        assert held == {str(1 - lacking["id"])}, f"a ghost in the slot with room alone: {held}"

        create_in(cluster, NAMESPACE, sparkpi_job(spark, "patient"))
        create_in(cluster, NAMESPACE, scheduling("patient", ["patient", "patient"]))
        waiting = wait_for(
            "the Scheduling to say what it waits for",
            lambda: "room" in (why := status(cluster, "scheduling", "patient").get("waitingFor") or "") and why,
            timeout=60,
        )
        assert waiting == (
            f"slots for job patient (it needs 2, 1 of the testbed's slots are free; "
            f"other pods hold the room of slot {lacking['id']} (see the testbed's slots))"
        )
        assert "patient-driver" not in history.pods, "no driver is started while the job waits"
    finally:  # its room back, also for the tests after this one if this one failed
        cluster.kubectl("delete", "-n", NAMESPACE, "pod", "holder", "--ignore-not-found", "--wait=false")
    try:
        wait_for("the Scheduling to complete", completed(cluster, "patient"), timeout=300)
        log = driver_log(spark.node, "patient-driver")  # before the Scheduling goes, and its driver with it
    finally:
        cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", "patient", "--wait=true", "--timeout=60s")

    (run,) = status(cluster, "batchjob", "patient")["runs"]
    assert (run["outcome"], sorted(run["slots"]), run["nodes"]) == ("Succeeded", [0, 1], [NODE]), run
    executors = [e for e in history.with_role(ROLE_EXECUTOR).values() if e.labels[JOB_LABEL] == "patient"]
    assert sorted((e.slot for e in executors), key=str) == [0, 1], "one executor in each slot"
    assert all(e.node == NODE and e.running for e in executors), executors
    assert history.refused() == {}, "the kubelet admitted every pod"
    assert "Pi is roughly 3.1" in log, log[-2000:]
    wait_for("real ghosts back in both slots", lambda: real_ghosts(spark, NAMESPACE), timeout=90)


# --- the simulator conforms -----------------------------------------------------------------------------------

SIM_NAMESPACE = "sim-jobs"
SIM_NODE = "kwok-spark"
SIM_NODE_LABEL = "esi.test/sim-testbed"
SIM_RUNTIME = 30  # seconds a simulated run of a job the co-location table does not know lasts
# A run long enough to lose an executor in: 8 partitions of 3 s each, two at a time.
LONG_PI = ["8", "3000"]
SparkApplication = create_namespaced_resource(SPARK.group, SPARK.version, SPARK.kind, SPARK.plural)
REAL = Side(NAMESPACE, NODE, NODE_LABEL)
SIMULATED = Side(SIM_NAMESPACE, SIM_NODE, SIM_NODE_LABEL)


@pytest.fixture(scope="module")
def simulated(real_spark: RealSpark) -> RealSpark:
    """Beside the real operator: ``python -m sim`` for a namespace of its own, and a KWOK node as big as the real
    one, labelled for a Testbed there."""
    cluster = real_spark.cluster
    # The simulator also handles FlinkDeployments; the SparkApplication CRD stays the real operator's.
    flink = [c for c in application_crds() if c["metadata"]["name"] == FLINK.crd_name]
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": flink}))
    cluster.wait_for_crds([FLINK.crd_name])
    node = NodeSpec(SIM_NODE, cpu="2", memory="3584Mi", labels={SIM_NODE_LABEL: "0"})
    simulator_beside(cluster, SIM_NAMESPACE, node, SIM_RUNTIME)
    rbac = {"apiVersion": "v1", "kind": "List", "items": driver_rbac(SIM_NAMESPACE)}
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(rbac))
    return real_spark


def application_state(status: dict[str, Any]) -> str:
    return str((status.get("applicationState") or {}).get("state", ""))


def name_shape(name: str) -> str:
    """A pod's name, an executor's without its prefix: Spark names executors after what the program calls
    itself, which sim cannot know."""
    return "<prefix>-exec-" + name.rpartition("-exec-")[2] if "-exec-" in name else name


def spark_pod_shape(side: Side, pod: dict[str, Any]) -> Any:
    """``pod_shape`` with what Spark takes from the program's own name, which sim cannot know, left out."""
    metadata = dict(pod["metadata"], name=name_shape(pod["metadata"]["name"]))
    labels = dict(metadata.get("labels") or {})
    if labels.get("spark-role") == "executor":
        labels["spark-app-name"] = "<program>"
    return pod_shape(side, {**pod, "metadata": {**metadata, "labels": labels}})


def lose_an_executor(spark: RealSpark, run: Run) -> str:
    """Once both executors run, delete the first (as a node's failure or an eviction would); its name."""

    def both_running() -> list[str] | None:
        names = sorted(n for n in run.pods("spark-role", "executor") if n in run.running)
        return names if len(names) == 2 else None

    lost = wait_for(f"both executors running in {run.side.namespace}", both_running, timeout=240)[0]
    spark.cluster.kubectl("delete", "-n", run.side.namespace, "pod", lost, "--wait=false")
    return lost


def test_the_simulator_runs_a_spark_job_as_the_real_operator_and_spark_do(simulated: RealSpark) -> None:
    spark, cluster = simulated, simulated.cluster
    runs: dict[Side, Run] = {}
    try:
        lost = {}
        # One side after the other: a simulated run lasts SIM_RUNTIME, and the real side may take longer to start.
        for side in (REAL, SIMULATED):
            ensure_testbed(spark.cluster, side, SLOT)
            runs[side] = Run(cluster, side, SparkApplication, application_state)
            job = sparkpi_job(spark, "conform", arguments=LONG_PI, driver_node=side.node)
            create_in(cluster, side.namespace, job)
            create_in(cluster, side.namespace, scheduling("conform", ["conform", "conform"]))  # two slots
            lost[side] = lose_an_executor(spark, runs[side])
        for side in runs:
            wait_for(
                f"the Scheduling in {side.namespace} to complete",
                completed(cluster, "conform", side.namespace),
                timeout=300,
            )
    finally:
        for run in runs.values():
            run.stop()

    shapes = {}
    for side, run in runs.items():
        job = status_in(cluster, side.namespace, "batchjob", "conform")
        assert job["state"] == "Succeeded", (side.namespace, job.get("message"))
        executors = run.pods("spark-role", "executor")  # as they appeared
        assert len(executors) == 3, (side.namespace, list(executors))
        *_, replacement = executors
        assert replacement in run.running, f"the replacement executor {replacement} ran"
        assert run.slot[replacement] == run.slot[lost[side]], "the replacement took the lost executor's slot"
        (driver,) = run.pods("spark-role", "driver").values()
        shapes[side] = {
            "driver": spark_pod_shape(side, driver),
            "executors": [spark_pod_shape(side, body) for body in executors.values()],
            "states": run.states,
            "executorState": {name_shape(name): state for name, state in run.status["executorState"].items()},
            "status fields": sorted(run.status),
        }
    assert shapes[SIMULATED] == shapes[REAL]


# --- two real nodes -----------------------------------------------------------------------------------------

SECOND_NODE = "real-spark-2"
SHARED_LABEL = "esi.test/real-shared"


def test_two_jobs_share_two_real_nodes_each_with_a_slot_on_both(real_spark: RealSpark, history: PodHistory) -> None:
    """A second real node and a Testbed of two slots on each; two long SparkPi jobs, each given one slot on each
    node by a slot list: each job's executors run on both nodes, beside the other job's, and each run records
    both nodes and the other job as co-located."""
    spark, cluster = real_spark, real_spark.cluster
    free_the_real_node(cluster)
    second = RealNode(cluster, RealNodeSpec(SECOND_NODE, cpu="2", memory="3584Mi", labels={SHARED_LABEL: "1"}))
    second.start()
    images.import_image(spark_image(), second.containerd_socket)
    cluster.kubectl("label", "node", NODE, f"{SHARED_LABEL}=0", "--overwrite")
    testbed = testbed_manifest(nodeLabel=SHARED_LABEL, slotsPerNode=2, resourcesPerSlot=SLOT)
    create_in(cluster, NAMESPACE, testbed | {"metadata": {"name": "shared"}})

    def slots_by_node() -> dict[str, list[int]] | None:
        table = status(cluster, "testbed", "shared")
        if table.get("state") != "Ready" or table.get("counts", {}).get("free") != 4:
            return None
        by_node: dict[str, list[int]] = {}
        for slot in table["slots"]:
            by_node.setdefault(slot["nodeName"], []).append(slot["id"])
        return by_node

    by_node = wait_for("the shared Testbed Ready with four free slots", slots_by_node, timeout=120)
    assert sorted(by_node) == [NODE, SECOND_NODE], by_node
    lists = {"pi-a": [by_node[NODE][0], by_node[SECOND_NODE][0]], "pi-b": [by_node[NODE][1], by_node[SECOND_NODE][1]]}
    for job, driver_node in (("pi-a", NODE), ("pi-b", SECOND_NODE)):
        create_in(cluster, NAMESPACE, sparkpi_job(spark, job, arguments=LONG_PI, driver_node=driver_node))
    slot_based = {"jobs": [{"name": {"name": job}, "slotIds": ids} for job, ids in lists.items()]}
    manifest = scheduling_manifest(testbed={"name": "shared"}, queueBased=None, slotBased=slot_based)
    create_in(cluster, NAMESPACE, manifest | {"metadata": {"name": "shared"}})
    try:
        wait_for("the shared Scheduling to complete", completed(cluster, "shared"), timeout=300)
        logs = {job: driver_log(node, f"{job}-driver") for job, node in (("pi-a", spark.node), ("pi-b", second))}
    finally:
        cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", "shared", "--wait=true", "--timeout=90s")
        cluster.kubectl("delete", "-n", NAMESPACE, "testbed", "shared", "--wait=true", "--timeout=90s")

    runs = {}
    for job, ids in lists.items():
        (run,) = runs[job] = status(cluster, "batchjob", job)["runs"]
        assert (run["outcome"], sorted(run["slots"]), run["nodes"]) == ("Succeeded", sorted(ids), [NODE, SECOND_NODE])
        assert "Pi is roughly 3.1" in logs[job]
    # A run's co-located jobs are those that met it on its nodes: each of the two ran beside the other.
    assert runs["pi-a"][0]["colocatedJobs"] == ["pi-b"], runs
    assert runs["pi-b"][0]["colocatedJobs"] == ["pi-a"], runs
    executors = [life for life in history.with_role(ROLE_EXECUTOR).values() if life.labels[JOB_LABEL] in lists]
    assert {(e.labels[JOB_LABEL], e.node) for e in executors} == {
        (job, node) for job in lists for node in (NODE, SECOND_NODE)
    }, "each job ran an executor on each node"
    assert history.refused() == {}, "the kubelet admitted every pod"
