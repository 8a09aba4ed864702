"""`pulumi up` of the ``cluster`` stack onto real nodes, then a real SparkPi through the in-cluster API, then
`pulumi destroy` (issue: the cluster stack, for real).

A local cluster of its own with Services and cluster DNS (``infra.local_cluster.network``: kube-proxy, CoreDNS) and
one real node; esi's image, the kube-scheduler image, the Spark operator's image and the Spark image are
built here and imported into the node — no registry. Everything then runs as it would in a team's cluster:
esi's operators, API and second scheduler as the stack's Deployments (non-root, read-only root filesystems,
probes, their own ServiceAccounts' permissions), the Spark operator from the pinned module's own Helm chart,
a SparkPi BatchJob scheduled through the API's Service with a researcher's ServiceAccount token, its driver
reaching the API server at ``kubernetes.default.svc`` and its executors placed by esi-scheduler, which calls
the extender at ``esi-extender.<namespace>.svc``. `pulumi destroy` must leave the CRDs and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace, Node, Pod, Service, ServiceAccountToken
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from esi.client import EsiClient
from esi.resources.crds import DEFINITIONS
from infra import images
from infra.images.esi import esi_image
from infra.images.spark import EXAMPLES_JAR, SPARK_PI_CLASS, spark_image, spark_version
from infra.local_cluster import LocalCluster
from infra.local_cluster.network import ClusterNetwork
from infra.local_cluster.real_node import RealNode, RealNodeSpec
from infra.local_cluster.real_node import unavailable_reason as real_nodes_unavailable
from infra.stacks.local import job_accounts
from infra.stacks.second_scheduler import scheduler_image
from infra.stacks.spark_operator import operator_image
from infra.stacks.spark_operator import unavailable_reason as spark_operator_unavailable
from tests.integration.kube import get_or_none, wait_for
from tests.integration.pulumi_project import PulumiProject

if (reason := real_nodes_unavailable() or spark_operator_unavailable()) is not None:
    pytest.skip(f"the cluster stack on real nodes: {reason}", allow_module_level=True)

pytestmark = pytest.mark.xdist_group("cluster-network")  # one kube-proxy per machine

ESI = "esi-system"
JOBS = "jobs"
NODE = "stack-node"
LABEL = "esi.test/stack-slots"
DEPLOYMENTS = ((ESI, "esi-operators"), (ESI, "esi-api"), (ESI, "esi-scheduler"), ("spark-operator", None))


# The image of the tree as the session first saw it: the node is given that one, and the stack names it (a
# source file edited meanwhile must not make the stack name an image the node never got).
_esi_image = functools.cache(esi_image)


@pytest.fixture(scope="module")
def stack_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, RealNode]]:
    cluster = LocalCluster("real-stack", workdir=tmp_path_factory.mktemp("real-stack") / "kwok")
    try:
        cluster.create()
        network = ClusterNetwork(cluster)
        # The node's labels come from the stack (esi:nodeLabels), as on a team's cluster.
        node = RealNode(cluster, RealNodeSpec(NODE, cpu="2", memory="6Gi", cluster_dns=network.dns_address()))
        node.start()
        network.start(NODE)
        for image in (_esi_image(), scheduler_image(), operator_image(), spark_image()):
            images.import_image(image, node.containerd_socket)
        yield cluster, node
    finally:
        if os.environ.get("ESI_KEEP_CLUSTER"):
            print(f"kept the cluster {cluster.name} in {cluster.directory}")
        else:
            cluster.delete()


def stack_config(cluster: LocalCluster, manifests: Path) -> dict[str, Any]:
    """The stack's settings as a team would write them for images in their registry (here: imported)."""
    operator = operator_image().reference
    repository, tag = operator.removeprefix(f"{images.REGISTRY}/").split(":")
    return {
        "esi:mode": "cluster",
        "esi:manifests": str(manifests),
        "esi:kubeconfig": str(cluster.kubeconfig),
        "esi:namespace": ESI,
        "esi:image": _esi_image().reference,
        "esi:schedulerImage": scheduler_image().reference,
        "esi:imagePullPolicy": "Never",
        "esi:apiNamespace": JOBS,
        "esi:nodeLabels": {NODE: {LABEL: "0"}},
        "esi:installOperators": True,
        "esi:sparkOperator": {
            "values": {
                "image": {"registry": images.REGISTRY, "repository": repository, "tag": tag, "pullPolicy": "Never"}
            }
        },
        "esi:flinkOperator": {"install": False},  # its chart's repository is not reachable here
    }


def researcher_token(cluster: LocalCluster, client: Client) -> str:
    """A ServiceAccount of the jobs' namespace allowed esi's resources there: what a researcher is given."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "researcher", "namespace": JOBS},
        "rules": [
            {
                "apiGroups": ["esi.tu-berlin.de"],
                "resources": ["testbeds", "batchjobs", "schedulings"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "researcher", "namespace": JOBS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "researcher"},
        "subjects": [{"kind": "ServiceAccount", "name": "researcher", "namespace": JOBS}],
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "researcher", "namespace": JOBS}}
    apply(cluster, [account, role, binding])
    issued = client.create(
        ServiceAccountToken(metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], expirationSeconds=3600)),
        name="researcher",
        namespace=JOBS,
    )
    assert issued.status is not None
    return str(issued.status.token)


def apply(cluster: LocalCluster, manifests: list[dict[str, Any]]) -> None:
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    cluster.kubectl("apply", "--server-side", "--field-manager=researcher", "-f", "-", input_text=items)


def the_jobs() -> list[dict[str, Any]]:
    """A Testbed of the node's two slots and SparkPi, as a researcher commits them (no address of anything:
    the driver finds the API server by its Service name)."""
    testbed = {
        "apiVersion": "esi.tu-berlin.de/v1alpha1",
        "kind": "Testbed",
        "metadata": {"name": "tb", "namespace": JOBS},
        "spec": {"nodeLabel": LABEL, "slotsPerNode": 2, "resourcesPerSlot": {"cpu": "500m", "memory": "1Gi"}},
    }
    sparkpi = {
        "apiVersion": "esi.tu-berlin.de/v1alpha1",
        "kind": "BatchJob",
        "metadata": {"name": "sparkpi", "namespace": JOBS},
        "spec": {
            "sparkSpec": {
                "type": "Scala",
                "mode": "cluster",
                "sparkVersion": spark_version(),
                "image": spark_image().reference,
                "imagePullPolicy": "Never",
                "mainClass": SPARK_PI_CLASS,
                "mainApplicationFile": f"local:///opt/spark/{EXAMPLES_JAR}",
                "arguments": ["2"],
                "driver": {
                    "serviceAccount": "spark",
                    "cores": 1,
                    "coreRequest": "500m",
                    "coreLimit": "500m",
                    "memory": "512m",
                },
            }
        },
    }
    return [testbed, sparkpi]


def deployments_ready(client: Client) -> list[str]:
    """The Deployments that are not ready yet (esi's three and the Spark operator's controller)."""
    waiting = []
    for namespace, name in DEPLOYMENTS:
        found = [d for d in client.list(Deployment, namespace=namespace) if name in (None, _name(d.metadata))]
        if not found or any(d.status is None or (d.status.readyReplicas or 0) < 1 for d in found):
            waiting.append(f"{namespace}/{name or '*'}")
    return waiting


def _name(metadata: ObjectMeta | None) -> str | None:
    return None if metadata is None else metadata.name


def check_esi_runs_in_containers_on_the_node(client: Client) -> None:
    assert deployments_ready(client) == [], "Pulumi waits for the Deployments and the Helm release"
    for pod in client.list(Pod, namespace=ESI):
        assert pod.spec is not None
        assert pod.status is not None
        assert pod.spec.nodeName == NODE
        statuses = pod.status.containerStatuses or []
        assert statuses, pod.status
        assert all(s.ready and (s.containerID or "").startswith("containerd://") for s in statuses), statuses


def run_sparkpi_through_the_api(local: LocalCluster, node: RealNode, client: Client) -> float:
    """A researcher's Testbed and SparkPi, scheduled through the API's Service; seconds until recorded."""
    client.create(Namespace(metadata=ObjectMeta(name=JOBS)))
    apply(local, [*job_accounts(JOBS), *the_jobs()])
    token = researcher_token(local, client)
    api = client.get(Service, "esi-api", namespace=ESI)
    assert api.spec is not None
    url = f"http://{api.spec.clusterIP}:8082"  # this machine reaches ClusterIPs through kube-proxy's rules
    started = time.monotonic()
    with EsiClient(url, token=token, namespace=JOBS) as esi:
        wait_for("the Testbed's slots through the API", lambda: esi.testbed("tb").state == "SUCCESS", 120)
        esi.submit_slots("pi", "tb", {"sparkpi": [0, 1]})  # two executors, one in each slot
        done = esi.wait_for_scheduling("pi", timeout=300)
    seconds = time.monotonic() - started
    assert [(j.name, j.state) for j in done.job_status] == [("sparkpi", "Completed")]
    status = json.loads(local.kubectl("get", "batchjob", "sparkpi", "-n", JOBS, "-o", "json"))["status"]
    run = status["runs"][-1]
    assert (run["outcome"], sorted(run["slots"]), run["nodes"]) == ("Succeeded", [0, 1], [NODE]), run
    logs = "".join(p.read_text(errors="replace") for p in node.pod_logs.glob(f"{JOBS}_sparkpi-driver_*/*/*.log"))
    assert "Pi is roughly 3.1" in logs, logs[-3000:]
    # esi's processes did all of it with their ServiceAccounts' permissions: nothing refused them.
    logs_of_esi = [*node.pod_logs.glob(f"{ESI}_*/*/*.log"), *node.pod_logs.glob("spark-operator_*/*/*.log")]
    assert len({log.parent.parent for log in logs_of_esi}) == 4, logs_of_esi
    for log in logs_of_esi:
        refused = [line for line in log.read_text(errors="replace").splitlines() if "forbidden" in line.lower()]
        assert refused == [], f"{log}:\n" + "\n".join(refused[:5])
    return seconds


def check_only_the_crds_are_left(client: Client) -> None:
    def gone(namespace: str) -> bool:
        return get_or_none(client, Namespace, namespace) is None

    wait_for("the stack's namespaces to go", lambda: gone(ESI) and gone("spark-operator"), 120)
    names = [_name(r.metadata) for r in client.list(ClusterRole)]
    names += [_name(r.metadata) for r in client.list(ClusterRoleBinding)]
    assert not [n for n in names if n and (n.startswith("esi:") or "spark-operator" in n)], names
    assert not list(client.list(Deployment, namespace="spark-operator")), "the Helm release is gone"
    labels = client.get(Node, NODE).metadata
    assert labels is not None
    assert LABEL not in (labels.labels or {}), "the stack's node label goes with it"
    for definition in DEFINITIONS:  # kept: deleting a CRD deletes every object of its kind
        assert get_or_none(client, CustomResourceDefinition, definition.name) is not None


def test_pulumi_up_runs_esi_on_real_nodes_and_a_sparkpi_through_the_in_cluster_api(
    stack_cluster: tuple[LocalCluster, RealNode], tmp_path: Path
) -> None:
    local, node = stack_cluster
    client = Client(config=KubeConfig.from_file(local.kubeconfig), field_manager="esi-tests")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    pulumi = PulumiProject.create(tmp_path)
    pulumi.init_stack("cluster", stack_config(local, manifests))
    destroyed = False
    try:
        started = time.monotonic()
        pulumi("up", "--yes", "--skip-preview")
        up_seconds = time.monotonic() - started
        check_esi_runs_in_containers_on_the_node(client)
        run_seconds = run_sparkpi_through_the_api(local, node, client)
        started = time.monotonic()
        pulumi("destroy", "--yes", "--skip-preview")
        destroy_seconds = time.monotonic() - started
        destroyed = True
    finally:
        if not destroyed:
            with contextlib.suppress(Exception):
                pulumi("destroy", "--yes", "--skip-preview")

    print(
        f"\ncluster stack on a real node: pulumi up {up_seconds:.1f} s (images imported before), "
        f"SparkPi scheduled through the API -> recorded {run_seconds:.1f} s, pulumi destroy {destroy_seconds:.1f} s"
    )
    check_only_the_crds_are_left(client)
    client.close()
