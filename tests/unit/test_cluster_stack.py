"""The ``cluster`` stack under Pulumi's mocks: what ``pulumi up`` would ask the Kubernetes provider to create.

No engine, no cluster: ``pulumi.runtime.set_mocks`` replaces the engine, a recording monitor keeps every
registration (type, name, inputs, provider, retainOnDelete), and the tests read the manifests from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.server
import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pytest
import yaml
from pulumi.runtime.config import CONFIG, set_all_config
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs

from esi.objects.names import SCHEDULER_NAME
from infra.stacks.cluster import (
    API_PORT,
    DEFAULT_IMAGE,
    EXTENDER_PORT,
    ChartUnavailable,
    ClusterEsi,
    ClusterEsiArgs,
    ConfigError,
    HelmChart,
    check_chart_available,
    operators_deployment_manifest,
)
from infra.stacks.spark_operator import chart_dir
from infra.toolchain import REPO_ROOT

# Pulumi's mock monitor gives every thread it is called from an event loop of its own and never closes them.
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

NAMESPACE = "esi-test"
K8S = "kubernetes:"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass(frozen=True)
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]  # as the program gave them
    state: dict[str, Any]  # as the (mock) provider returned them: names filled in
    provider: str | None
    retain_on_delete: bool


@dataclass(frozen=True)
class Deployed:
    """What one run of the program registered, and its outputs."""

    resources: list[Registered]
    outputs: dict[str, str]

    def of_type(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, k8s_name: str, namespace: str | None = None) -> dict[str, Any]:
        found = [
            r.inputs
            for r in self.of_type(type_)
            if r.inputs["metadata"].get("name") == k8s_name and r.inputs["metadata"].get("namespace") == namespace
        ]
        assert len(found) == 1, f"{len(found)} {type_} named {namespace}/{k8s_name}"
        return found[0]


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.inputs[args.typ, args.name] = args.inputs
        state = dict(args.inputs)
        metadata = state.get("metadata")
        # The provider names objects that have no metadata.name after their Pulumi name; so do we.
        if args.typ.startswith(K8S) and isinstance(metadata, dict) and "name" not in metadata:
            state["metadata"] = {**metadata, "name": f"{args.name}-0a1b2c"}
        return f"{args.name}-id", state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


class _RecordingMonitor(MockMonitor):
    """The mock monitor, also keeping what ``Mocks.new_resource`` does not see (the resource options)."""

    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.recorded = mocks
        self.registered: list[Registered] = []

    def RegisterResource(self, request: Any) -> Any:
        answer = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        custom = bool(request.custom)
        self.registered.append(
            Registered(
                request.type,
                request.name,
                _plain(self.recorded.inputs.get((request.type, request.name), {})) if custom else {},
                _plain(self.resources[answer.urn].state) if custom else {},
                request.provider or None,
                request.HasField("retainOnDelete") and request.retainOnDelete,
            )
        )
        return answer


def _plain(value: Any) -> Any:
    """Inputs as JSON would have them (the mocks hand back protobuf numbers as floats: 1.0 for 1)."""
    return json.loads(json.dumps(value), parse_float=lambda f: int(float(f)) if float(f).is_integer() else float(f))


def _no_check(chart: HelmChart) -> None:
    pass


def _close_event_loops() -> None:
    """Close the loop of this run and those pulumi's mocks made in their worker threads and left open
    (``pulumi.runtime.sync_await._ensure_event_loop``): else they are garbage-collected in some later test,
    whose run then fails on the ResourceWarning."""
    for thing in gc.get_objects():
        if isinstance(thing, asyncio.AbstractEventLoop) and not thing.is_running() and not thing.is_closed():
            thing.close()


def deploy(args: ClusterEsiArgs, chart_check: Callable[[HelmChart], None] = _no_check) -> Deployed:
    """Run ``ClusterEsi`` under mocks and return everything it registered."""
    # pulumi's mocks and test runner use the thread's current event loop; tests before this one
    # (asyncio.run) may have left none.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = _Mocks()
    monitor = _RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, monitor=monitor, preview=False)
    outputs: dict[str, str] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]  # runs the program, waits for every registration
    def program() -> pulumi.Output[None]:
        esi = ClusterEsi("esi", args, chart_check=chart_check)
        return pulumi.Output.all(esi.namespace, esi.api_service).apply(
            lambda v: outputs.update(namespace=v[0], apiService=v[1])
        )

    try:
        program()
    finally:
        asyncio.set_event_loop(None)
        _close_event_loops()
    return Deployed(monitor.registered, outputs)


ARGS = ClusterEsiArgs(namespace=NAMESPACE, install_operators=False)


@pytest.fixture(scope="module")
def deployed() -> Deployed:
    return deploy(ARGS)


# ------------------------------------------------------------------------------------------------- RBAC


def _rules(d: Deployed, component: str) -> list[dict[str, Any]]:
    """Every rule of esi's own roles for esi-<component>: its ClusterRole and its Role in esi's namespace."""
    names = {(CLUSTER_ROLE, f"esi:{NAMESPACE}:{component}"), (ROLE, f"esi-{component}")}
    return [
        rule
        for role in d.of_type(CLUSTER_ROLE) + d.of_type(ROLE)
        if (role.type, role.inputs["metadata"]["name"]) in names
        for rule in role.inputs["rules"]
    ]


def _allows(rules: Sequence[Mapping[str, Any]], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    return any(
        group in rule["apiGroups"]
        and resource in rule["resources"]
        and verb in rule["verbs"]
        and (not rule.get("resourceNames") or name in rule["resourceNames"])
        for rule in rules
    )


ESI = "esi.tu-berlin.de"
# (component, group, resource, verb, resource name or None, allowed?) — what the code calls, and what it must
# not be able to do.
ACCESS = [
    ("operators", ESI, "testbeds", "watch", None, True),
    ("operators", ESI, "schedulings", "patch", None, True),  # kopf's finalizer
    ("operators", ESI, "batchjobs/status", "patch", None, True),
    ("operators", ESI, "testbeds/finalizers", "update", None, True),  # ghosts' blockOwnerDeletion
    ("operators", "", "pods", "create", None, True),
    ("operators", "", "pods", "delete", None, True),
    ("operators", "", "nodes", "list", None, True),
    ("operators", "coordination.k8s.io", "leases", "create", None, True),
    ("operators", "", "events", "create", None, True),
    ("operators", "sparkoperator.k8s.io", "sparkapplications", "create", None, True),
    ("operators", "flink.apache.org", "flinkdeployments", "delete", None, True),
    ("operators", ESI, "schedulings", "delete", None, False),
    ("operators", "", "nodes", "patch", None, False),
    ("operators", "", "secrets", "get", None, False),
    ("api", ESI, "schedulings", "create", None, True),
    ("api", ESI, "schedulings", "update", None, True),
    ("api", ESI, "schedulings", "delete", None, True),
    ("api", ESI, "batchjobs", "patch", None, True),
    ("api", ESI, "testbeds", "list", None, True),
    ("api", "", "pods", "patch", None, True),  # the extender's slot annotation
    ("api", "authentication.k8s.io", "tokenreviews", "create", None, True),
    ("api", "authorization.k8s.io", "subjectaccessreviews", "create", None, True),
    ("api", ESI, "testbeds", "patch", None, False),
    ("api", ESI, "schedulings/status", "patch", None, False),  # one writer per status: the operators
    ("api", "", "pods", "delete", None, True),  # the ghost of the slot an executor is bound into
    ("api", "", "pods/eviction", "create", None, False),
    ("api", "", "nodes", "list", None, True),  # esi label-nodes (esi:labelNodes, on by default)
    ("api", "", "nodes", "patch", None, True),
    ("api", "", "nodes", "delete", None, False),
    ("api", "", "pods", "create", None, False),
    ("scheduler", "coordination.k8s.io", "leases", "update", SCHEDULER_NAME, True),
    ("scheduler", "coordination.k8s.io", "leases", "update", "someone-else", False),
]


@pytest.mark.parametrize(
    ("component", "group", "resource", "verb", "name", "allowed"),
    ACCESS,
    ids=[f"{c}-{'may' if a else 'may-not'}-{v}-{r}" for c, _, r, v, _, a in ACCESS],
)
def test_each_component_may_do_what_its_code_calls_and_no_more(
    deployed: Deployed, component: str, group: str, resource: str, verb: str, name: str | None, allowed: bool
) -> None:
    assert _allows(_rules(deployed, component), group, resource, verb, name) is allowed


def test_rbac_has_no_wildcards_and_binds_no_admin_role(deployed: Deployed) -> None:
    roles = deployed.of_type(CLUSTER_ROLE) + deployed.of_type(ROLE)
    assert roles
    for role in roles:
        for rule in role.inputs["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], f"{role.name}: {key} {rule[key]}"
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), role.name
            assert not {"secrets", "clusterroles", "clusterrolebindings", "roles", "rolebindings"} & set(
                rule["resources"]
            )
    bindings = deployed.of_type(CLUSTER_ROLE_BINDING) + deployed.of_type(ROLE_BINDING)
    bound = {b.inputs["roleRef"]["name"] for b in bindings}
    assert not bound & {"cluster-admin", "admin", "edit"}
    for binding in bindings:
        (subject,) = binding.inputs["subjects"]
        assert subject["kind"] == "ServiceAccount"
        assert subject["namespace"] == NAMESPACE


def test_second_scheduler_gets_the_roles_upstream_documents_for_one(deployed: Deployed) -> None:
    def bound(binding_type: str) -> set[tuple[str | None, str]]:
        return {
            (b.inputs["metadata"].get("namespace"), b.inputs["roleRef"]["name"])
            for b in deployed.of_type(binding_type)
            if b.inputs["subjects"][0]["name"] == "esi-scheduler"
        }

    assert bound(CLUSTER_ROLE_BINDING) == {(None, "system:kube-scheduler"), (None, "system:volume-scheduler")}
    assert bound(ROLE_BINDING) == {
        ("kube-system", "extension-apiserver-authentication-reader"),
        (NAMESPACE, "esi-scheduler"),  # its leader-election Lease
    }


def test_label_nodes_off_leaves_the_apis_node_permissions_out(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    args = config({"labelNodes": "false"})
    without = deploy(replace(ARGS, label_nodes=args.label_nodes))

    assert args.label_nodes is False
    assert not _allows(_rules(without, "api"), "", "nodes", "patch", None)
    assert not _allows(_rules(without, "api"), "", "nodes", "list", None)
    assert _allows(_rules(without, "api"), "", "pods", "list", None)


def test_cluster_wide_rbac_names_carry_the_namespace_so_installations_do_not_collide() -> None:
    other = deploy(replace(ARGS, namespace="esi-other"))
    names = {r.inputs["metadata"]["name"] for r in other.of_type(CLUSTER_ROLE) + other.of_type(CLUSTER_ROLE_BINDING)}
    assert names
    assert all(name.startswith("esi:esi-other:") for name in names), names


# ------------------------------------------------------------------------------------- workloads, services


def _container(d: Deployed, name: str) -> dict[str, Any]:
    deployment = d.one(DEPLOYMENT, name, NAMESPACE)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_scheduler_config_map_scores_all_nodes_and_calls_the_extender_service(deployed: Deployed) -> None:
    (config_map,) = deployed.of_type(CONFIG_MAP)
    config = yaml.safe_load(config_map.inputs["data"]["config.yaml"])

    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["percentageOfNodesToScore"] == 100
    assert [p["schedulerName"] for p in config["profiles"]] == [SCHEDULER_NAME]
    assert "kubeconfig" not in config["clientConnection"], "in a cluster it uses its ServiceAccount"
    (extender,) = config["extenders"]
    assert (extender["filterVerb"], extender["bindVerb"], extender["nodeCacheCapable"]) == ("filter", "bind", True)
    url = urlsplit(extender["urlPrefix"])
    assert (url.scheme, url.hostname, url.port, url.path) == (
        "http",
        f"esi-extender.{NAMESPACE}.svc",
        8080,
        "/extender",
    )
    service = deployed.one(SERVICE, "esi-extender", NAMESPACE)
    assert [p["port"] for p in service["spec"]["ports"]] == [url.port]
    assert service["spec"]["ports"][0]["targetPort"] == "extender"
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceNamespace": NAMESPACE,
        "resourceName": SCHEDULER_NAME,
    }


def test_scheduler_deployment_runs_kube_scheduler_with_that_config_map(deployed: Deployed) -> None:
    container = _container(deployed, "esi-scheduler")
    spec = deployed.one(DEPLOYMENT, "esi-scheduler", NAMESPACE)["spec"]["template"]["spec"]
    (config_map,) = deployed.of_type(CONFIG_MAP)

    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.34.4"
    assert container["command"][:2] == ["/usr/local/bin/kube-scheduler", "--config=/etc/esi-scheduler/config.yaml"]
    assert spec["volumes"] == [{"name": "config", "configMap": {"name": config_map.state["metadata"]["name"]}}]
    assert container["volumeMounts"][0]["mountPath"] == "/etc/esi-scheduler"
    assert spec["serviceAccountName"] == "esi-scheduler"
    assert "name" not in config_map.inputs["metadata"], "Pulumi names it, so a new config rolls the Deployment"


def test_api_deployment_serves_both_ports_on_all_interfaces_with_kubernetes_auth(deployed: Deployed) -> None:
    container = _container(deployed, "esi-api")
    command = container["command"]

    assert command[:3] == ["python", "-m", "api"]
    assert {
        "--host=0.0.0.0",
        "--extender-host=0.0.0.0",
        f"--port={API_PORT}",
        f"--extender-port={EXTENDER_PORT}",
    } <= set(command)
    assert "--namespace=default" in command
    assert not any(arg.startswith("--token-file") for arg in command), "in a cluster Kubernetes authenticates"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8082, "extender": 8080}
    assert container["image"] == DEFAULT_IMAGE
    api = deployed.one(SERVICE, "esi-api", NAMESPACE)["spec"]
    assert api["ports"] == [{"name": "http", "port": 8082, "targetPort": "http", "protocol": "TCP"}]
    assert api["type"] == "ClusterIP"
    assert deployed.outputs == {"namespace": NAMESPACE, "apiService": f"esi-api.{NAMESPACE}.svc:8082"}


def test_network_policy_lets_only_the_scheduler_reach_the_extender_port(deployed: Deployed) -> None:
    (policy,) = deployed.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    spec = policy.inputs["spec"]
    api_pods = deployed.one(DEPLOYMENT, "esi-api", NAMESPACE)["spec"]["template"]["metadata"]["labels"]
    scheduler_pods = deployed.one(DEPLOYMENT, "esi-scheduler", NAMESPACE)["spec"]["template"]["metadata"]["labels"]

    assert spec["podSelector"]["matchLabels"].items() <= api_pods.items()
    by_port = {rule["ports"][0]["port"]: rule for rule in spec["ingress"]}
    assert set(by_port) == {API_PORT, EXTENDER_PORT}
    assert "from" not in by_port[API_PORT], "the API is for every caller (it checks tokens itself)"
    (source,) = by_port[EXTENDER_PORT]["from"]
    assert source["podSelector"]["matchLabels"].items() <= scheduler_pods.items()
    assert not source["podSelector"]["matchLabels"].items() <= api_pods.items()


def test_operators_deployment_runs_one_kopf_process_with_a_liveness_probe(deployed: Deployed) -> None:
    deployment = deployed.one(DEPLOYMENT, "esi-operators", NAMESPACE)["spec"]
    container = _container(deployed, "esi-operators")

    assert container["command"][:3] == ["python", "-m", "operators"]
    assert "--liveness=http://0.0.0.0:8081/healthz" in container["command"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert (deployment["replicas"], deployment["strategy"]) == (1, {"type": "Recreate"}), "kopf runs standalone"
    assert deployment["template"]["spec"]["serviceAccountName"] == "esi-operators"


def test_every_container_runs_as_non_root_without_privileges(deployed: Deployed) -> None:
    deployments = deployed.of_type(DEPLOYMENT)
    assert len(deployments) == 3
    for deployment in deployments:
        for container in deployment.inputs["spec"]["template"]["spec"]["containers"]:
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert "memory" in container["resources"]["limits"]


def test_node_selector_places_esi_pods() -> None:
    placed = deploy(replace(ARGS, node_selector={"pool": "system"}))
    for deployment in placed.of_type(DEPLOYMENT):
        assert deployment.inputs["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}


# --------------------------------------------------------------------------- cluster-scoped, provider, nodes


def test_every_kubernetes_object_goes_through_the_stacks_own_provider(deployed: Deployed) -> None:
    (provider,) = deployed.of_type("pulumi:providers:kubernetes")
    assert provider.name == "esi-cluster"
    objects = [r for r in deployed.resources if r.type.startswith(K8S)]
    assert len(objects) > 20
    for obj in objects:
        # A provider reference is "<urn>::<id>"; none means the ambient kubeconfig's default provider.
        assert obj.provider is not None, obj.name
        assert "pulumi:providers:kubernetes::esi-cluster::" in obj.provider, obj.name


def test_crds_and_priority_classes_are_upserted_and_survive_destroy(deployed: Deployed) -> None:
    crds = deployed.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    classes = deployed.of_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")

    assert {c.inputs["metadata"]["name"] for c in crds} == {
        f"{p}.{ESI}" for p in ("testbeds", "batchjobs", "schedulings", "runs")
    }
    assert {c.inputs["metadata"]["name"]: c.inputs["value"] for c in classes} == {
        "esi-ghost": 1_000_000,
        "esi-executor": 2_000_000,
    }
    for shared in crds + classes:
        assert shared.retain_on_delete, f"{shared.name} must outlive the stack"
        assert shared.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    others = [r for r in deployed.resources if r.type.startswith(K8S) and r not in crds + classes]
    assert not any(r.retain_on_delete for r in others)


def test_node_labels_are_applied_as_node_patches() -> None:
    labelled = deploy(replace(ARGS, node_labels={"node-a": {"esi/id": "0"}, "node-b": {"esi/id": "1", "x": "y"}}))
    patches = {
        p.inputs["metadata"]["name"]: p.inputs["metadata"]["labels"]
        for p in labelled.of_type("kubernetes:core/v1:NodePatch")
    }
    assert patches == {"node-a": {"esi/id": "0"}, "node-b": {"esi/id": "1", "x": "y"}}


def test_no_node_labels_no_node_patches(deployed: Deployed) -> None:
    assert deployed.of_type("kubernetes:core/v1:NodePatch") == []


# ---------------------------------------------------------------------------------------------- Helm


def test_no_helm_releases_when_install_operators_is_off(deployed: Deployed) -> None:
    assert deployed.of_type(RELEASE) == []


def test_helm_releases_of_both_operators_when_switched_on() -> None:
    checked: list[str] = []
    with_operators = deploy(replace(ARGS, install_operators=True), chart_check=lambda c: checked.append(c.chart))
    releases = {r.inputs["name"]: r.inputs for r in with_operators.of_type(RELEASE)}

    assert checked == ["spark-operator", "flink-kubernetes-operator"]
    spark, flink = releases["spark-operator"], releases["flink-kubernetes-operator"]
    assert spark["chart"] == str(chart_dir()), "the pinned release's own chart, from the module (make tools)"
    assert "repositoryOpts" not in spark
    assert "version" not in spark, "a local chart's Chart.yaml says its version"
    assert spark["values"]["spark"]["jobNamespaces"] == [""], "BatchJobs may live in any namespace"
    assert spark["values"]["webhook"]["enable"] is False, "executors get esi's settings from their template"
    assert (flink["chart"], flink["version"]) == ("flink-kubernetes-operator", "1.12.1")
    assert flink["repositoryOpts"] == {"repo": "https://downloads.apache.org/flink/flink-kubernetes-operator-1.12.1/"}
    assert not any(r.get("createNamespace") for r in releases.values()), "the stack's own Namespaces instead"
    namespaces = {n.inputs["metadata"]["name"] for n in with_operators.of_type("kubernetes:core/v1:Namespace")}
    assert {"spark-operator", "flink-operator"} <= namespaces, "destroy removes the releases' namespaces too"


def test_another_spark_operator_version_comes_from_its_chart_repository(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    older = config({"sparkOperator": {"version": "2.3.0"}}).spark_operator
    assert (older.repo, older.local) == ("https://kubeflow.github.io/spark-operator", False)
    assert config({}).spark_operator.local


def test_a_chart_left_out_is_neither_checked_nor_installed(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    args = config({"installOperators": "true", "flinkOperator": {"install": "false"}})
    checked: list[str] = []
    releases = deploy(args, chart_check=lambda c: checked.append(c.chart)).of_type(RELEASE)

    assert checked == ["spark-operator"]
    assert [r.inputs["name"] for r in releases] == ["spark-operator"]


def test_a_local_chart_is_checked_against_its_chart_yaml(tmp_path: Path) -> None:
    chart = replace(ClusterEsiArgs().spark_operator, repo=str(tmp_path))
    with pytest.raises(ChartUnavailable, match=r"Chart\.yaml cannot be read.*Run `make tools`"):
        check_chart_available(chart)
    (tmp_path / "Chart.yaml").write_text("name: spark-operator\nversion: 2.3.0\n")
    with pytest.raises(ChartUnavailable, match=r"describes \('spark-operator', '2\.3\.0'\), not"):
        check_chart_available(chart)
    (tmp_path / "Chart.yaml").write_text(f"name: spark-operator\nversion: {chart.version}\n")
    check_chart_available(chart)


def test_a_chart_in_an_oci_registry_is_named_by_its_reference() -> None:
    oci = replace(ClusterEsiArgs().spark_operator, repo="oci://registry.example/charts/")
    with_oci = deploy(replace(ARGS, install_operators=True, spark_operator=oci))
    (spark,) = [r.inputs for r in with_oci.of_type(RELEASE) if r.inputs["name"] == "spark-operator"]

    assert spark["chart"] == "oci://registry.example/charts/spark-operator"
    assert "repositoryOpts" not in spark


def test_an_unavailable_chart_stops_the_program_before_any_release() -> None:
    def unavailable(chart: HelmChart) -> None:
        raise ChartUnavailable(chart, "test")

    with pytest.raises(ChartUnavailable, match="esi:installOperators false"):
        deploy(replace(ARGS, install_operators=True), chart_check=unavailable)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_chart_repository_error_names_chart_repository_and_the_switch() -> None:
    repo = f"http://127.0.0.1:{_closed_port()}/charts"
    chart = replace(ClusterEsiArgs().spark_operator, repo=repo)

    with pytest.raises(ChartUnavailable) as raised:
        check_chart_available(chart, timeout=5)

    message = str(raised.value)
    assert "the Spark operator" in message
    assert "'spark-operator' version 2.4.0" in message
    assert f"{repo}/index.yaml could not be fetched" in message
    assert "pulumi config set esi:installOperators false" in message
    assert "esi:sparkOperator.repo" in message


@contextlib.contextmanager
def _chart_repository(index: Mapping[str, Any]) -> Iterator[str]:
    body = yaml.safe_dump(index).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/charts/index.yaml"
            self.send_response(200 if found else 404)
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/charts"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_chart_check_accepts_a_listed_version_and_refuses_a_missing_one() -> None:
    index = {"apiVersion": "v1", "entries": {"spark-operator": [{"version": "2.3.0"}, {"version": "2.4.0"}]}}
    with _chart_repository(index) as repo:
        check_chart_available(replace(ClusterEsiArgs().spark_operator, repo=repo))
        with pytest.raises(ChartUnavailable, match=r"does not list that version \(versions there: 2\.3\.0, 2\.4\.0\)"):
            check_chart_available(replace(ClusterEsiArgs().spark_operator, repo=repo, version="9.9.9"))


# -------------------------------------------------------------------------------------------- config


@pytest.fixture
def config() -> Iterator[Callable[[Mapping[str, Any]], ClusterEsiArgs]]:
    """Set ``esi:*`` config as ``pulumi config set`` would (objects as JSON) and read it back."""
    saved = dict(CONFIG.get())

    def read(values: Mapping[str, Any]) -> ClusterEsiArgs:
        set_all_config({f"esi:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()})
        return ClusterEsiArgs.from_config(pulumi.Config("esi"))

    yield read
    set_all_config(saved)


def test_config_defaults(config: Callable[[Mapping[str, Any]], ClusterEsiArgs]) -> None:
    args = config({})
    assert args == ClusterEsiArgs()
    assert (args.namespace, args.kubeconfig, args.install_operators) == ("esi-system", None, True)


def test_config_values_are_read(config: Callable[[Mapping[str, Any]], ClusterEsiArgs]) -> None:
    args = config(
        {
            "namespace": "esi-prod",
            "kubeconfig": "/k/config",
            "image": "registry.example/esi:1.2.3",
            "apiNamespace": "jobs",
            "nodeLabels": {"node-a": {"esi/id": 0}},
            "installOperators": "false",
            "sparkOperator": {"version": "2.3.0", "values": {"controller": {"workers": 4}}},
            "flinkOperator": {"version": "1.13.0", "namespace": "flink"},
        }
    )

    assert (args.namespace, args.kubeconfig, args.image, args.api_namespace) == (
        "esi-prod",
        "/k/config",
        "registry.example/esi:1.2.3",
        "jobs",
    )
    assert args.node_labels == {"node-a": {"esi/id": "0"}}, "YAML numbers become label text"
    assert args.install_operators is False
    assert args.spark_operator.version == "2.3.0"
    assert args.spark_operator.values["controller"] == {"workers": 4}
    assert args.spark_operator.values["spark"] == {"jobNamespaces": [""]}, "esi's defaults stay under the user's"
    assert args.flink_operator.repo == "https://downloads.apache.org/flink/flink-kubernetes-operator-1.13.0/"
    assert args.flink_operator.namespace == "flink"


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"nodeLabels": ["node-a"]}, "esi:nodeLabels"),
        ({"nodeLabels": {"node-a": {"x": ["y"]}}}, "esi:nodeLabels.node-a.x"),
        ({"nodeSelector": {"pool": {"a": 1}}}, "esi:nodeSelector.pool"),
        ({"sparkOperator": {"versoin": "2.4.0"}}, "esi:sparkOperator"),
        ({"flinkOperator": {"values": ["x"]}}, "esi:flinkOperator.values"),
        ({"stalledAfter": "0"}, "esi:stalledAfter"),
        ({"keepRuns": "-1"}, "esi:keepRuns"),
        ({"keepRunsFor": "0"}, "esi:keepRunsFor"),
    ],
    ids=[
        "labels-not-a-map",
        "label-not-text",
        "selector-not-text",
        "chart-unknown-key",
        "chart-values-not-a-map",
        "stall-not-positive",
        "keep-runs-negative",
        "keep-runs-for-not-positive",
    ],
)
def test_malformed_config_names_its_key(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs], values: Mapping[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config(values)


def test_a_label_value_yaml_read_as_a_float_is_refused_with_how_to_quote_it(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    # Pulumi reads its stack files as YAML 1.2, where the unquoted value 257e71 is the number 2.57e+73.
    with pytest.raises(ConfigError, match=r"esi:nodeSelector\.pool must be a string, not the number .*: quote it"):
        config({"nodeSelector": {"pool": 2.57e73}})


def command(args: ClusterEsiArgs) -> list[str]:
    """The operators' command line, as the stack deploys it."""
    return list(operators_deployment_manifest(args)["spec"]["template"]["spec"]["containers"][0]["command"])


def test_a_stall_time_set_in_config_reaches_the_operators(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    assert not any(a.startswith("--stalled-after") for a in command(config({}))), "unset: the operators' default"
    assert "--stalled-after=90" in command(config({"stalledAfter": "90"}))


def test_a_retention_set_in_config_reaches_the_operators(
    config: Callable[[Mapping[str, Any]], ClusterEsiArgs],
) -> None:
    assert not any(a.startswith("--keep-runs") for a in command(config({}))), "unset: the operators' default"
    assert {"--keep-runs=500", "--keep-runs-for=86400"} <= set(
        command(config({"keepRuns": "500", "keepRunsFor": "86400"}))
    )


def test_the_committed_cluster_stack_config_is_valid(config: Callable[[Mapping[str, Any]], ClusterEsiArgs]) -> None:
    stack = yaml.safe_load((REPO_ROOT / "Pulumi.cluster.yaml").read_text())["config"]
    args = config({key.removeprefix("esi:"): value for key, value in stack.items()})

    assert args.install_operators is True
    assert (args.spark_operator.local, args.spark_operator.install) == (True, True), "the module's own chart"
    assert args.flink_operator.install is False, "this machine cannot fetch the Flink operator's chart"
    assert args.namespace == "esi-system"
    assert args.flink_operator.repo.endswith(f"-{args.flink_operator.version}/")
    assert args.spark_operator.values["webhook"] == {"enable": False}
