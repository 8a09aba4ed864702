"""`pulumi up` of the ``cluster`` stack (esi's own program, infra/__main__.py) against the session's cluster,
then `pulumi destroy`.

KWOK runs no containers, but the API server validates and admits every manifest, the controllers roll out
the Deployments (KWOK reports their pods running), RBAC is evaluated by the real authorizer, and NodePatch
labels land on real Node objects. The permissions are also shown to be enough: the API app and a real
kube-scheduler run here with the credentials of their ServiceAccounts. The stack gets a namespace of its
own; the CRDs and PriorityClasses it upserts are the session's shared ones (``esi_crds``,
``esi_priority_classes``), which destroy must leave in place.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod, Service, ServiceAccount, ServiceAccountToken
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, RoleBinding
from lightkube.resources.scheduling_v1 import PriorityClass

from api.app import create_api_app
from api.auth import KubernetesAuth
from api.threaded import serve_in_thread
from esi.objects.names import EXECUTOR_PRIORITY_CLASS, GHOST_PRIORITY_CLASS, SCHEDULER_NAME
from esi.resources.crds import DEFINITIONS
from infra import toolchain
from infra.local_cluster import LocalCluster, free_port
from infra.stacks import pulumi_local
from infra.stacks.cluster import ClusterEsiArgs, scheduler_config
from tests.conftest import report_failures_in
from tests.integration.conftest import AddNodes
from tests.integration.kube import get_or_none, pod, wait_for
from tests.integration.pulumi_project import PulumiProject

LABEL = "esi.test/cluster-stack"
COMPONENTS = ("operators", "api", "scheduler")


def _may(
    client: Client,
    namespace: str,
    component: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str | None = None,
    where: str | None = "jobs",
    name: str | None = None,
) -> bool:
    """What the real authorizer answers for esi-<component>'s ServiceAccount."""
    review = client.create(
        SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{namespace}:esi-{component}",
                groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                resourceAttributes=ResourceAttributes(
                    verb=verb, group=group, resource=resource, subresource=subresource, namespace=where, name=name
                ),
            )
        )
    )
    assert review.status is not None
    return bool(review.status.allowed)


def _scheduler_config(client: Client, namespace: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration in the ConfigMap esi-scheduler's pods mount."""
    deployment = client.get(Deployment, "esi-scheduler", namespace=namespace)
    assert deployment.spec is not None
    assert deployment.spec.template.spec is not None
    (volume,) = deployment.spec.template.spec.volumes or []
    assert volume.configMap is not None
    assert volume.configMap.name
    config_map = client.get(ConfigMap, volume.configMap.name, namespace=namespace)
    return dict(yaml.safe_load((config_map.data or {})["config.yaml"]))


def _labels(client: Client, node: str) -> dict[str, str]:
    metadata = client.get(Node, node).metadata
    assert metadata is not None
    return dict(metadata.labels or {})


def _cluster_wide_rbac(client: Client, namespace: str) -> list[str]:
    """The installation's ClusterRoles and bindings, and its RoleBindings in kube-system, by name."""
    prefix = f"esi:{namespace}:"
    found = [
        *(r.metadata.name for r in client.list(ClusterRole) if r.metadata and r.metadata.name),
        *(r.metadata.name for r in client.list(ClusterRoleBinding) if r.metadata and r.metadata.name),
        *(r.metadata.name for r in client.list(RoleBinding, namespace="kube-system") if r.metadata and r.metadata.name),
    ]
    return sorted(name for name in found if name.startswith(prefix))


def _check_workloads(client: Client, namespace: str, nodes: list[str]) -> None:
    for component in COMPONENTS:
        deployment = client.get(Deployment, f"esi-{component}", namespace=namespace)
        assert deployment.status is not None
        assert deployment.status.readyReplicas == 1, component
        assert client.get(ServiceAccount, f"esi-{component}", namespace=namespace)
    pods = list(client.list(Pod, namespace=namespace))
    assert len(pods) == 3
    assert {p.spec.nodeName for p in pods if p.spec is not None} <= set(nodes), "esi:nodeSelector"
    for service, port in (("esi-api", 8082), ("esi-extender", 8080)):
        spec = client.get(Service, service, namespace=namespace).spec
        assert spec is not None
        assert [p.port for p in spec.ports or []] == [port]
    assert client.get(NetworkPolicy, "esi-api", namespace=namespace)
    config = _scheduler_config(client, namespace)
    assert config["percentageOfNodesToScore"] == 100
    assert [p["schedulerName"] for p in config["profiles"]] == [SCHEDULER_NAME]
    assert config["extenders"][0]["bindVerb"] == "bind"
    assert config["extenders"][0]["urlPrefix"] == f"http://esi-extender.{namespace}.svc:8080/extender"


def _check_rbac(client: Client, namespace: str) -> None:
    """Each ServiceAccount may do what its component calls, and not what it does not."""

    def may(component: str, verb: str, resource: str, **where: Any) -> bool:
        return _may(client, namespace, component, verb, resource, **where)

    esi = {"group": "esi.tu-berlin.de"}
    assert may("operators", "create", "pods")
    assert may("operators", "patch", "schedulings", subresource="status", **esi)
    assert may("operators", "create", "sparkapplications", group="sparkoperator.k8s.io")
    assert not may("operators", "get", "secrets")
    assert may("api", "create", "schedulings", **esi)
    assert may("api", "create", "tokenreviews", group="authentication.k8s.io", where=None)
    assert may("api", "create", "pods", subresource="binding"), "the extender binds executors"
    assert may("api", "delete", "pods"), "in place of their slot's ghost"
    assert not may("api", "create", "pods")
    assert not may("api", "create", "pods", subresource="eviction")
    assert not may("api", "patch", "schedulings", subresource="status", **esi)
    assert may("api", "patch", "nodes", where=None), "esi label-nodes (esi:labelNodes)"
    assert not may("api", "delete", "nodes", where=None)
    assert may("scheduler", "create", "pods", subresource="binding")
    leases = {"group": "coordination.k8s.io", "where": namespace}
    assert may("scheduler", "update", "leases", name=SCHEDULER_NAME, **leases)
    assert not may("scheduler", "update", "leases", name="someone-else", **leases)
    assert may("scheduler", "get", "configmaps", where="kube-system", name="extension-apiserver-authentication")
    assert not may("scheduler", "create", "pods")


def _service_account_kubeconfig(
    cluster: LocalCluster, client: Client, namespace: str, component: str, directory: Path
) -> tuple[Path, str]:
    """A kubeconfig (and its token) that acts as esi-<component>, as its pods would in the cluster."""
    issued = client.create(
        ServiceAccountToken(metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], expirationSeconds=600)),
        name=f"esi-{component}",
        namespace=namespace,
    )
    assert issued.status is not None
    token = str(issued.status.token)
    (entry,) = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"]
    path = directory / f"esi-{component}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [entry],
                "users": [{"name": component, "user": {"token": token}}],
                "contexts": [{"name": component, "context": {"cluster": entry["name"], "user": component}}],
                "current-context": component,
            }
        )
    )
    path.chmod(0o600)
    return path, token


def _check_api_runs_with_its_permissions(kubeconfig: Path, token: str, namespace: str) -> None:
    """esi's API app with esi-api's credentials: its watches list everything (ready), and it authenticates
    and authorizes a caller through TokenReview and SubjectAccessReview (here: esi-api itself, a reader)."""
    config = KubeConfig.from_file(kubeconfig)
    reviews = AsyncClient(config=config)
    app = create_api_app(KubernetesAuth(reviews), namespace=namespace, kube_config=config, closing=[reviews.close])
    with serve_in_thread(app, lifespan="on") as url, httpx.Client(base_url=url, timeout=10) as http:
        wait_for("the API, as esi-api, to list what it serves", lambda: http.get("/readyz").status_code == 200)
        caller = {"Authorization": f"Bearer {token}"}
        answer = http.get("/external/testbeds", headers=caller)

        def run_table() -> Any:  # the run table follows the Runs by a watch of its own: 503 until listed
            page = http.get("/external/runs", headers=caller)
            return page.json() if page.status_code == 200 else None

        runs = wait_for("the API's run table", run_table)
    assert answer.status_code == 200, answer.text
    assert set(runs) == {"items", "continue"}


def _check_scheduler_runs_with_its_permissions(
    client: Client, kubeconfig: Path, namespace: str, pool: str, directory: Path
) -> None:
    """kube-scheduler with esi-scheduler's credentials and the stack's configuration elects itself on its
    Lease, binds a pod, and is refused nothing. It has a name of its own and no extender here: the
    session's esi-scheduler has that name, and the extender Service is not reachable from this machine."""
    name = f"esi-rbac-{pool}"
    config = scheduler_config(ClusterEsiArgs(namespace=namespace))
    config["clientConnection"]["kubeconfig"] = str(kubeconfig)
    config["profiles"] = [{"schedulerName": name}]
    del config["extenders"]
    config_path = directory / "scheduler.yaml"
    config_path.write_text(json.dumps(config))
    log_path = directory / "scheduler.log"
    with log_path.open("w") as log:
        scheduler = subprocess.Popen(
            [
                str(toolchain.binary("kube-scheduler")),
                f"--config={config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                # Delegated authentication reads kube-system/extension-apiserver-authentication.
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def holder() -> str | None:
        lease = get_or_none(client, Lease, SCHEDULER_NAME, namespace)
        return None if lease is None or lease.spec is None else lease.spec.holderIdentity

    def bound_to() -> str | None:
        spec = client.get(Pod, "rbac-probe", namespace=namespace).spec
        return None if spec is None else spec.nodeName

    try:
        wait_for("esi-scheduler to hold its Lease", holder)
        client.create(pod("rbac-probe", namespace, scheduler=name, node_selector={"esi.test/pool": pool}))
        wait_for("the probe pod to be bound", bound_to)
    finally:
        scheduler.terminate()
        try:
            scheduler.wait(timeout=10)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()
        with contextlib.suppress(ApiError):  # 404: it was never created
            client.delete(Pod, "rbac-probe", namespace=namespace, grace_period=0)
    refused = [line for line in log_path.read_text().splitlines() if "forbidden" in line]
    assert refused == [], "\n".join(refused[:5])


def test_pulumi_up_deploys_esi_into_the_cluster_and_destroy_removes_it(
    cluster: LocalCluster,
    client: Client,
    esi_crds: LocalCluster,
    esi_priority_classes: LocalCluster,
    add_nodes: AddNodes,
    unique: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    nodes = add_nodes(2)
    namespace = f"esi-cluster-{unique}"
    report_failures_in(request.node, cluster, namespace)
    no_manifests = tmp_path / "manifests"  # the GitOps part of the program is tested on its own
    no_manifests.mkdir()
    pulumi = PulumiProject.create(tmp_path)
    pulumi.init_stack(
        "cluster",
        {
            "esi:mode": "cluster",
            "esi:manifests": str(no_manifests),
            "esi:kubeconfig": str(cluster.kubeconfig),
            "esi:namespace": namespace,
            "esi:nodeLabels": {node: {LABEL: str(i)} for i, node in enumerate(nodes)},
            # esi's own pods go to this test's nodes, not the shared ones other tests count on.
            "esi:nodeSelector": {"esi.test/pool": unique},
            "esi:installOperators": True,
        },
    )

    # The Spark operator's chart is the pinned module's own; the Flink operator's repository is not reachable
    # here: the program must say so, and how to go on without.
    with pytest.raises(pulumi_local.PulumiError) as refused:
        pulumi("preview")
    said = str(refused.value)  # whole in the failure message: pytest shortens a long operand to its ends
    assert "cannot install the Flink Kubernetes operator" in said, said
    assert "flink-kubernetes-operator-1.12.1/index.yaml could not be fetched" in said, said
    assert "esi:flinkOperator.install: false" in said, said
    assert "pulumi config set esi:installOperators false" in said, said
    pulumi("config", "set", "--type", "bool", "esi:installOperators", "false")

    destroyed = False
    try:
        started = time.monotonic()
        pulumi("up", "--yes", "--skip-preview")
        up_seconds = time.monotonic() - started

        outputs = json.loads(pulumi("stack", "output", "--json"))
        assert (outputs["namespace"], outputs["apiService"]) == (namespace, f"esi-api.{namespace}.svc:8082")
        pulumi("preview", "--expect-no-changes")  # what it applied is what it asks for: no drift to fight
        _check_workloads(client, namespace, nodes)
        _check_rbac(client, namespace)
        _check_api_runs_with_its_permissions(
            *_service_account_kubeconfig(cluster, client, namespace, "api", tmp_path), namespace
        )
        scheduler_kubeconfig, _ = _service_account_kubeconfig(cluster, client, namespace, "scheduler", tmp_path)
        _check_scheduler_runs_with_its_permissions(client, scheduler_kubeconfig, namespace, unique, tmp_path)
        prefix = f"esi:{namespace}"
        assert _cluster_wide_rbac(client, namespace) == sorted(
            [
                *[f"{prefix}:operators"] * 2,  # ClusterRole and ClusterRoleBinding
                *[f"{prefix}:api"] * 2,
                f"{prefix}:scheduler:system:kube-scheduler",
                f"{prefix}:scheduler:system:volume-scheduler",
                f"{prefix}:scheduler:extension-apiserver-authentication-reader",  # in kube-system
            ]
        )
        assert [_labels(client, node).get(LABEL) for node in nodes] == ["0", "1"]
        for definition in DEFINITIONS:
            metadata = client.get(CustomResourceDefinition, definition.name).metadata
            assert metadata is not None
            assert (metadata.annotations or {}).get("pulumi.com/patchForce") == "true", "the stack applied it"

        started = time.monotonic()
        pulumi("destroy", "--yes", "--skip-preview")
        destroy_seconds = time.monotonic() - started
        destroyed = True
    finally:
        if not destroyed:  # leave the session's cluster as it was even when the test fails
            with contextlib.suppress(pulumi_local.PulumiError):
                pulumi("destroy", "--yes", "--skip-preview")

    print(f"\ncluster stack: pulumi up {up_seconds:.1f} s, pulumi destroy {destroy_seconds:.1f} s")
    wait_for(f"namespace {namespace} to go", lambda: get_or_none(client, Namespace, namespace) is None)
    assert _cluster_wide_rbac(client, namespace) == []
    assert [LABEL in _labels(client, node) for node in nodes] == [False, False], "NodePatch labels go with the stack"
    # Shared with the rest of the cluster (here: the session's other tests), so retained.
    for definition in DEFINITIONS:
        assert get_or_none(client, CustomResourceDefinition, definition.name) is not None
    for name in (GHOST_PRIORITY_CLASS, EXECUTOR_PRIORITY_CLASS):
        assert get_or_none(client, PriorityClass, name) is not None
