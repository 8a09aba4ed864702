"""The ``cluster`` stack: esi deployed into an existing Kubernetes cluster named by a kubeconfig.

What ``pulumi up`` creates (each box a ComponentResource whose children are parented to it)::

    ClusterEsi (esi:cluster:Esi)
    ├── Provider            kubernetes, from esi:kubeconfig (else the ambient kubeconfig), server-side apply
    ├── Namespace           esi:namespace (default esi-system)
    ├── EsiCrds             the 3 CRDs and 2 PriorityClasses: cluster-scoped, upserted, retained on destroy
    ├── NodeLabels          one NodePatch per node of esi:nodeLabels (removed again on destroy)
    ├── EsiRbac x3          per component: ServiceAccount, own ClusterRole/Role + bindings, built-in role bindings
    ├── SecondSchedulerDeployment  ConfigMap (KubeSchedulerConfiguration) + Deployment running kube-scheduler
    ├── EsiApi              Deployment (python -m api), Services esi-api:8082 and esi-extender:8080, NetworkPolicy
    ├── EsiOperators        Deployment (python -m operators)
    └── ApplicationOperators  Helm releases of the Spark and the Flink Kubernetes operator (esi:installOperators)

Arguments are plain data first (``ClusterEsiArgs.from_config``), manifests are built by pure ``*_manifest``
functions, and the components only send them. The permissions of each component (``OPERATORS``, ``API``,
``SCHEDULER``) are written down here once, from what its code calls; nothing gets ``*`` or cluster-admin.

Cluster-scoped objects need care: CRDs and PriorityClasses may already exist (installed by hand, by an earlier
stack, or shared by several esi installations). They are *upserted* (the provider's server-side apply takes
over the fields, ``pulumi.com/patchForce`` settling conflicts with earlier appliers) and *retained* on
destroy — deleting a CRD would delete every Testbed, BatchJob and Scheduling in the cluster. Everything else
cluster-scoped (ClusterRoles, bindings) carries the namespace in its name, so installations do not collide.

The Spark operator's chart at the pinned version is the release's own, copied from the pinned Go module by
``make tools`` (``infra.stacks.spark_operator.chart_dir``): no chart repository is needed. Other charts are fetched
when ``pulumi up`` runs. ``check_chart_available`` looks first — at the local chart's ``Chart.yaml``, or at the
chart repository's index — and, when the chart is missing or lacks the version, stops with an error that
names the chart, where it was looked for and the switches that leave it out (``<chart>.install``,
``esi:installOperators``) — rather than installing anything half-way.
"""

from __future__ import annotations

import http.client
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import yaml

from esi.objects.applications import FLINK, SPARK
from esi.objects.names import SCHEDULER_NAME
from esi.objects.priority import priority_classes
from esi.resources.crds import DEFINITIONS, crd
from esi.resources.meta import GROUP, deep_merged, part_of_esi
from infra.stacks import processes
from infra.stacks.processes import API_PORT, EXTENDER_PORT, OPERATORS_HEALTH_PORT
from infra.stacks.second_scheduler import IMAGE_BINARY, NONROOT_UID, SecondSchedulerSettings, scheduler_configuration
from infra.stacks.spark_operator import chart_dir
from infra.toolchain import load_pins

__all__ = [
    "API",
    "API_PORT",
    "DEFAULT_IMAGE",
    "DEFAULT_SCHEDULER_IMAGE",
    "EXTENDER_PORT",
    "NODE_LABELLING",
    "OPERATORS",
    "SCHEDULER",
    "ApplicationOperators",
    "ChartUnavailable",
    "ClusterEsi",
    "ClusterEsiArgs",
    "ConfigError",
    "EsiApi",
    "EsiCrds",
    "EsiOperators",
    "EsiRbac",
    "HelmChart",
    "NodeLabels",
    "Permissions",
    "Rule",
    "SecondSchedulerDeployment",
    "api_deployment_manifest",
    "api_permissions",
    "check_chart_available",
    "extender_url",
    "operators_deployment_manifest",
    "retention",
    "scheduler_config",
    "scheduler_deployment_manifest",
    "stalled_after",
]

# Not published anywhere yet: build it from the Dockerfile, push it, and set esi:image.
DEFAULT_IMAGE: Final = "ghcr.io/tu-berlin-esi/esi:0.1.0"
# The kube-scheduler of the Kubernetes release this project builds and tests against (pyproject.toml); a
# second scheduler should match the cluster's version, so esi:schedulerImage overrides it.
DEFAULT_SCHEDULER_IMAGE: Final = "registry.k8s.io/kube-scheduler:v1.34.4"
SCHEDULER_SECURE_PORT: Final = 10259  # kube-scheduler's default; serves /healthz over HTTPS
ESI_UID: Final = 10001  # the user the Dockerfile creates
SCHEDULER_CONFIG_DIR: Final = "/etc/esi-scheduler"
PATCH_FORCE: Final = {"pulumi.com/patchForce": "true"}
PART_OF: Final = part_of_esi()

SPARK_OPERATOR_REPO: Final = "https://kubeflow.github.io/spark-operator"
FLINK_OPERATOR_REPO: Final = "https://downloads.apache.org/flink/flink-kubernetes-operator-{version}/"
DEFAULT_SPARK_OPERATOR_VERSION: Final = load_pins()["spark-operator"]  # the release `make tools` builds
DEFAULT_FLINK_OPERATOR_VERSION: Final = "1.12.1"
# Merged under whatever esi:sparkOperator.values / esi:flinkOperator.values say.
DEFAULT_SPARK_OPERATOR_VALUES: Final[Mapping[str, Any]] = {
    # BatchJobs live in any namespace; "" makes the operator watch all of them.
    "spark": {"jobNamespaces": [""]},
    # No webhook: esi puts schedulerName, priority class, affinity and tolerations into the executor's pod
    # template (esi/objects/applications.py), which the operator hands to Spark; only spec.driver/executor's
    # own placement fields need the webhook, and esi writes none (checked against the real operator:
    # tests/integration/test_real_spark.py). A webhook would be one more pod whose outage (failurePolicy)
    # blocks the job namespaces' pods.
    "webhook": {"enable": False},
}
# Everything else esi needs of Flink is in each FlinkDeployment esi writes (the TaskManager count pinned to the
# slots, pod templates already merged, no spec.podTemplate left for the operator to merge) or done by esi (a
# finished FlinkDeployment deleted once its run is recorded, so the operator's shutdown TTL never matters). The
# JobManager's account: the chart creates `flink` with its Role in each of `watchNamespaces` (only in its own
# namespace when that is empty, the default); elsewhere examples/manifests/serviceaccount.yaml has it.
DEFAULT_FLINK_OPERATOR_VALUES: Final[Mapping[str, Any]] = {
    # The chart's validating webhook needs cert-manager, which esi does not install; FlinkDeployments are
    # validated by the operator itself either way.
    "webhook": {"create": False},
}


# ---------------------------------------------------------------------------------------------- arguments


@dataclass(frozen=True)
class HelmChart:
    """One Helm release: which chart, from which repository, at which version, where, with which values."""

    title: str  # what it is, for people: "the Spark operator"
    config_key: str  # where its settings live: "esi:sparkOperator"
    release: str
    chart: str
    repo: str
    version: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    install: bool = True

    @property
    def local(self) -> bool:
        """Whether ``repo`` is a chart directory on this machine (not a repository or registry URL)."""
        return "://" not in self.repo


def _spark_operator(version: str = DEFAULT_SPARK_OPERATOR_VERSION) -> HelmChart:
    """The pinned release from the module's own chart (``make tools``); another version from the repository."""
    repo = str(chart_dir()) if version == DEFAULT_SPARK_OPERATOR_VERSION else SPARK_OPERATOR_REPO
    return HelmChart(
        "the Spark operator",
        "esi:sparkOperator",
        "spark-operator",
        "spark-operator",
        repo,
        version,
        "spark-operator",
        DEFAULT_SPARK_OPERATOR_VALUES,
    )


def _flink_operator(version: str = DEFAULT_FLINK_OPERATOR_VERSION) -> HelmChart:
    return HelmChart(
        "the Flink Kubernetes operator",
        "esi:flinkOperator",
        "flink-kubernetes-operator",
        "flink-kubernetes-operator",
        FLINK_OPERATOR_REPO.format(version=version),
        version,
        "flink-operator",
        DEFAULT_FLINK_OPERATOR_VALUES,
    )


class ConfigError(pulumi.RunError, ValueError):
    """A malformed ``esi:*`` value; the message names the key and what it should be.

    A ``pulumi.RunError``: Pulumi shows the message alone, without a traceback.
    """


@dataclass(frozen=True)
class ClusterEsiArgs:
    """Everything the ``cluster`` stack needs to know, as plain data (read from the ``esi:*`` config)."""

    namespace: str = "esi-system"
    kubeconfig: str | None = None  # a path or the kubeconfig's text; None: $KUBECONFIG, then ~/.kube/config
    context: str | None = None
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    scheduler_image: str = DEFAULT_SCHEDULER_IMAGE
    api_namespace: str = "default"  # the API's namespace when a request names none
    node_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # node name -> labels to add
    node_selector: Mapping[str, str] = field(default_factory=dict)  # where esi's own pods may run
    install_operators: bool = True
    label_nodes: bool = True  # the API may label nodes for Testbeds (esi label-nodes): list and patch on nodes
    stalled_after: float | None = None  # seconds; None: the operators' default
    keep_runs: int | None = None  # Runs kept per namespace; None: the operators' default
    keep_runs_for: float | None = None  # seconds a Run is kept; None: however old
    spark_operator: HelmChart = field(default_factory=_spark_operator)
    flink_operator: HelmChart = field(default_factory=_flink_operator)

    @classmethod
    def from_config(cls, config: pulumi.Config) -> ClusterEsiArgs:
        """Read ``esi:*`` (``config`` is ``pulumi.Config("esi")``); a malformed value names its key."""
        defaults = cls()
        kubeconfig = config.get("kubeconfig")
        if kubeconfig and "\n" not in kubeconfig:  # a path, not the file's content
            kubeconfig = str(Path(kubeconfig).expanduser())
        return cls(
            namespace=config.get("namespace") or defaults.namespace,
            kubeconfig=kubeconfig or None,
            context=config.get("context") or None,
            image=config.get("image") or defaults.image,
            image_pull_policy=config.get("imagePullPolicy") or defaults.image_pull_policy,
            scheduler_image=config.get("schedulerImage") or defaults.scheduler_image,
            api_namespace=config.get("apiNamespace") or defaults.api_namespace,
            node_labels=_node_labels(config.get_object("nodeLabels")),
            node_selector=_string_map("esi:nodeSelector", config.get_object("nodeSelector")),
            install_operators=_flag(config.get_bool("installOperators"), defaults.install_operators),
            label_nodes=_flag(config.get_bool("labelNodes"), defaults.label_nodes),
            stalled_after=stalled_after(config),
            **retention(config),
            spark_operator=_chart(defaults.spark_operator, config.get_object("sparkOperator"), _spark_operator),
            flink_operator=_chart(defaults.flink_operator, config.get_object("flinkOperator"), _flink_operator),
        )


def stalled_after(config: pulumi.Config) -> float | None:
    """``esi:stalledAfter``: seconds a run may wait to be Running before it is Stalled; None when unset."""
    seconds = config.get_float("stalledAfter")
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"esi:stalledAfter must be a positive number of seconds, not {seconds}")
    return seconds


def retention(config: pulumi.Config) -> dict[str, Any]:
    """``esi:keepRuns`` (Runs kept per namespace) and ``esi:keepRunsFor`` (seconds a Run is kept), as the
    ``keep_runs`` and ``keep_runs_for`` of the stack's arguments; None when unset."""
    count, seconds = config.get_int("keepRuns"), config.get_float("keepRunsFor")
    if count is not None and count < 0:
        raise ConfigError(f"esi:keepRuns must be a count of 0 or more, not {count}")
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"esi:keepRunsFor must be a positive number of seconds, not {seconds}")
    return {"keep_runs": count, "keep_runs_for": seconds}


def _flag(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def _string_map(key: str, value: Any) -> dict[str, str]:
    """A map of strings; integers are accepted as their text (YAML reads a label value 0 as a number), floats are
    refused (their text is lost: YAML 1.2 reads 1e3 as 1000.0)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a map of strings, not {value!r}")
    result: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, float):
            raise ConfigError(f"{key}.{k} must be a string, not the number {v!r}: quote it, e.g. '1e3'")
        if isinstance(v, bool) or not isinstance(v, str | int):
            raise ConfigError(f"{key}.{k} must be a string, not {v!r}")
        result[str(k)] = str(v)
    return result


def _node_labels(value: Any) -> dict[str, dict[str, str]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"esi:nodeLabels must map node names to label maps, not {value!r}")
    return {str(node): _string_map(f"esi:nodeLabels.{node}", labels) for node, labels in value.items()}


def _chart(default: HelmChart, value: Any, for_version: Callable[[str], HelmChart]) -> HelmChart:
    """The default chart with what the config changes: version (and the repository that depends on it), repo,
    namespace and values (merged over the defaults, which esi relies on)."""
    if value is None:
        return default
    keys = ("install", "version", "repo", "namespace", "values")
    if not isinstance(value, Mapping):
        raise ConfigError(f"{default.config_key} must be a map ({', '.join(keys)}), not {value!r}")
    unknown = set(value) - set(keys)
    if unknown:
        raise ConfigError(f"{default.config_key} has unknown keys {sorted(unknown)}: use {', '.join(keys)}")
    chart = for_version(str(value["version"])) if "version" in value else default
    values = value.get("values") or {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{default.config_key}.values must be a map of Helm values, not {values!r}")
    install = value.get("install", True)
    if isinstance(install, str) and install.lower() in ("true", "false"):
        install = install.lower() == "true"
    if not isinstance(install, bool):
        raise ConfigError(f"{default.config_key}.install must be true or false, not {install!r}")
    return HelmChart(
        chart.title,
        chart.config_key,
        chart.release,
        chart.chart,
        str(value.get("repo") or chart.repo),
        chart.version,
        str(value.get("namespace") or chart.namespace),
        deep_merged(chart.values, values),
        install,
    )


# -------------------------------------------------------------------------------------------- permissions


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule."""

    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()

    def manifest(self) -> dict[str, Any]:
        rule: dict[str, Any] = {
            "apiGroups": list(self.groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.names:
            rule["resourceNames"] = list(self.names)
        return rule


@dataclass(frozen=True)
class Permissions:
    """What one component may do: its own rules, cluster-wide and in esi's namespace, and built-in roles."""

    component: str
    cluster_rules: tuple[Rule, ...] = ()  # a ClusterRole of its own, bound cluster-wide
    namespace_rules: tuple[Rule, ...] = ()  # a Role of its own in esi's namespace
    cluster_roles: tuple[str, ...] = ()  # built-in ClusterRoles, bound cluster-wide
    roles: tuple[tuple[str, str], ...] = ()  # built-in Roles as (namespace, name), bound in their namespace


_ESI_KINDS: Final = tuple(d.plural for d in DEFINITIONS)  # batchjobs, testbeds, schedulings, runs
# The kinds esi's reconcilers handle, each writing the status of its own: all but runs.
_RECONCILED: Final = tuple(d.plural for d in DEFINITIONS if d.status is not None)
_READ: Final = ("get", "list", "watch")

# python -m operators: kopf handlers (operators/*.py) that watch cluster-wide.
OPERATORS: Final = Permissions(
    "operators",
    cluster_rules=(
        # kopf patches its finalizer and progress annotations onto the objects it handles; a BatchJob being
        # deleted is read once more for the runs it keeps.
        Rule((GROUP,), _RECONCILED, (*_READ, "patch")),
        # Each reconciler writes its own status (kube/writes.py write_status: a JSON patch).
        Rule((GROUP,), tuple(f"{kind}/status" for kind in _RECONCILED), ("get", "patch")),
        # The BatchJob reconciler keeps each finished run as a Run; retention lists them (their metadata) and
        # deletes the oldest. Nothing of esi gets, watches or changes a Run.
        Rule((GROUP,), ("runs",), ("list", "create", "delete")),
        # Ghost pods and applications are owned by their Testbed/BatchJob with blockOwnerDeletion, which the
        # OwnerReferencesPermissionEnforcement admission plugin allows only to who may update the finalizers.
        Rule((GROUP,), ("testbeds/finalizers", "batchjobs/finalizers"), ("update",)),
        Rule(("",), ("pods",), (*_READ, "create", "delete")),  # ghost pods; every pod's node for slot sizes
        Rule(("",), ("nodes",), _READ),
        Rule(("coordination.k8s.io",), ("leases",), (*_READ, "create", "delete")),  # holds
        Rule(("",), ("events",), ("create",)),  # kopf.event
        Rule((SPARK.group,), (SPARK.plural,), (*_READ, "create", "delete")),
        Rule((FLINK.group,), (FLINK.plural,), (*_READ, "create", "delete")),
        # kopf notices CRDs that appear later (the Spark/Flink operators' charts may install theirs after).
        Rule(("apiextensions.k8s.io",), ("customresourcedefinitions",), _READ),
    ),
)

# python -m api: watch caches of the three kinds and esi's pods, the external API's writes, the extender's
# slot annotation on executor pods (before a preemption), its binding of the second scheduler's pods in place
# of a slot's ghost (which it deletes), and Kubernetes authentication of callers (no --token-file in a cluster).
API: Final = Permissions(
    "api",
    cluster_rules=(
        Rule((GROUP,), _ESI_KINDS, _READ),
        Rule((GROUP,), ("schedulings",), ("create", "update", "delete")),
        Rule((GROUP,), ("batchjobs",), ("patch",)),  # PUT /external/jobs: the externalScheduler data
        Rule(("",), ("pods",), ("list", "watch", "patch", "delete")),
        Rule(("",), ("pods/binding",), ("create",)),
        # What system:auth-delegator grants, spelled out: who is calling, and may they.
        Rule(("authentication.k8s.io",), ("tokenreviews",), ("create",)),
        Rule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),
    ),
)

# POST /external/testbeds/{name}/nodes (esi label-nodes): the API reads every node and labels the chosen ones.
# Granted unless esi:labelNodes is false; without it that route answers 502 and nothing else changes.
NODE_LABELLING: Final = (Rule(("",), ("nodes",), ("list", "patch")),)


def api_permissions(args: ClusterEsiArgs) -> Permissions:
    """The API's permissions in this installation: ``API``, and ``NODE_LABELLING`` unless left out."""
    return replace(API, cluster_rules=API.cluster_rules + NODE_LABELLING) if args.label_nodes else API


# The second kube-scheduler, as upstream's "Configure Multiple Schedulers" sets one up: the scheduler's and
# the volume scheduler's built-in roles, and reading the authentication configuration in kube-system.
# system:kube-scheduler lets it get/update only the Lease named kube-scheduler; esi-scheduler elects its
# leader with a Lease of its own name in esi's namespace, granted here.
SCHEDULER: Final = Permissions(
    "scheduler",
    namespace_rules=(
        Rule(("coordination.k8s.io",), ("leases",), ("create",)),  # create cannot be limited by name
        Rule(("coordination.k8s.io",), ("leases",), ("get", "update"), (SCHEDULER_NAME,)),
    ),
    cluster_roles=("system:kube-scheduler", "system:volume-scheduler"),
    roles=(("kube-system", "extension-apiserver-authentication-reader"),),
)


# ---------------------------------------------------------------------------------------------- manifests


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": f"esi-{component}", "app.kubernetes.io/component": component, **PART_OF}


def _selector(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": f"esi-{component}", **PART_OF}


def _restricted(uid: int) -> dict[str, Any]:
    """A container security context that passes the "restricted" Pod Security Standard."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _deployment(
    component: str, namespace: str, pod: dict[str, Any], node_selector: Mapping[str, str]
) -> dict[str, Any]:
    """One replica, replaced by stopping it first: each esi component must run at most once at a time (kopf
    runs standalone; the extender answers from one process' memory; the scheduler is one scheduler)."""
    spec = {"serviceAccountName": f"esi-{component}", **pod}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"esi-{component}", "namespace": namespace, "labels": _labels(component)},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _selector(component)},
            "template": {"metadata": {"labels": _labels(component)}, "spec": spec},
        },
    }


def _resources(cpu: str, memory: str, memory_limit: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory_limit}}


# The root filesystem is read-only; a writable /tmp keeps whatever library wants a temporary file working.
_TMP_MOUNT: Final = {"name": "tmp", "mountPath": "/tmp"}  # noqa: S108 (a volume of the pod's own)


def _esi_pod(container: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [container], "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}


def operators_deployment_manifest(args: ClusterEsiArgs) -> dict[str, Any]:
    """``python -m operators`` with a liveness endpoint the kubelet probes."""
    container = {
        "name": "operators",
        "image": args.image,
        "imagePullPolicy": args.image_pull_policy,
        "command": processes.operators_command(
            "python",
            liveness=processes.OPERATORS.live_url(OPERATORS_HEALTH_PORT, host="0.0.0.0"),  # noqa: S104 (the kubelet probes it)
            log_level="info",
            stalled_after=args.stalled_after,
            keep_runs=args.keep_runs,
            keep_runs_for=args.keep_runs_for,
        ),
        "ports": [{"name": "health", "containerPort": OPERATORS_HEALTH_PORT}],
        "livenessProbe": {"httpGet": {"path": processes.OPERATORS.liveness, "port": "health"}, "periodSeconds": 20},
        "resources": _resources("100m", "256Mi", "512Mi"),
        "securityContext": _restricted(ESI_UID),
        "volumeMounts": [_TMP_MOUNT],
    }
    return _deployment("operators", args.namespace, _esi_pod(container), args.node_selector)


def api_deployment_manifest(args: ClusterEsiArgs) -> dict[str, Any]:
    """``python -m api`` on all interfaces (the Services reach it), authenticating callers through Kubernetes."""
    container = {
        "name": "api",
        "image": args.image,
        "imagePullPolicy": args.image_pull_policy,
        "command": processes.api_command(
            "python",
            host="0.0.0.0",  # noqa: S104 (the Services reach it)
            port=API_PORT,
            extender_host="0.0.0.0",  # noqa: S104
            extender_port=EXTENDER_PORT,
            namespace=args.api_namespace,
            log_format="json",
        ),
        "ports": [
            {"name": "http", "containerPort": API_PORT},
            {"name": "extender", "containerPort": EXTENDER_PORT},
        ],
        "readinessProbe": {"httpGet": {"path": processes.API.readiness, "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": processes.API.liveness, "port": "http"}, "periodSeconds": 20},
        "resources": _resources("100m", "256Mi", "512Mi"),
        "securityContext": _restricted(ESI_UID),
        "volumeMounts": [_TMP_MOUNT],
    }
    return _deployment("api", args.namespace, _esi_pod(container), args.node_selector)


def _service(name: str, namespace: str, port: int, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels("api")},
        "spec": {
            "type": "ClusterIP",
            "selector": _selector("api"),
            "ports": [{"name": target, "port": port, "targetPort": target, "protocol": "TCP"}],
        },
    }


def api_network_policy_manifest(namespace: str) -> dict[str, Any]:
    """The API port is open; the extender port only to the second scheduler's pods (it takes no token)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "esi-api", "namespace": namespace, "labels": _labels("api")},
        "spec": {
            "podSelector": {"matchLabels": _selector("api")},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"port": API_PORT, "protocol": "TCP"}]},
                {
                    "ports": [{"port": EXTENDER_PORT, "protocol": "TCP"}],
                    "from": [{"podSelector": {"matchLabels": _selector("scheduler")}}],
                },
            ],
        },
    }


def extender_url(namespace: str) -> str:
    """Where the second scheduler reaches the extender: the esi-extender Service."""
    return processes.extender_url(f"esi-extender.{namespace}.svc", EXTENDER_PORT)


def scheduler_config(args: ClusterEsiArgs) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of esi-scheduler in the cluster: in-cluster credentials, the extender
    Service, and leader election on a Lease of its own, so a replacement never schedules beside its
    predecessor (say, one stuck on an unreachable node)."""
    config = scheduler_configuration(SecondSchedulerSettings(SCHEDULER_NAME, extender_url(args.namespace)), None)
    config["leaderElection"] = {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceNamespace": args.namespace,
        "resourceName": SCHEDULER_NAME,
    }
    return config


def scheduler_deployment_manifest(args: ClusterEsiArgs, config_map: str) -> dict[str, Any]:
    """kube-scheduler with the configuration in ``config_map``. The ConfigMap's name changes with its content
    (Pulumi names it), so a new configuration rolls the Deployment: kube-scheduler reads it only at start."""
    probe = {"httpGet": {"path": "/healthz", "port": SCHEDULER_SECURE_PORT, "scheme": "HTTPS"}}
    container = {
        "name": "kube-scheduler",
        "image": args.scheduler_image,
        "imagePullPolicy": args.image_pull_policy,
        "command": [IMAGE_BINARY, f"--config={SCHEDULER_CONFIG_DIR}/config.yaml", "--v=2"],
        "ports": [{"name": "https", "containerPort": SCHEDULER_SECURE_PORT}],
        "livenessProbe": {**probe, "initialDelaySeconds": 15},
        "readinessProbe": probe,
        "resources": _resources("100m", "128Mi", "512Mi"),
        "securityContext": _restricted(NONROOT_UID),
        "volumeMounts": [{"name": "config", "mountPath": SCHEDULER_CONFIG_DIR, "readOnly": True}],
    }
    pod = {"containers": [container], "volumes": [{"name": "config", "configMap": {"name": config_map}}]}
    return _deployment("scheduler", args.namespace, pod, args.node_selector)


def _rbac_name(namespace: str, component: str, suffix: str = "") -> str:
    """Cluster-wide names carry the namespace: two esi installations in one cluster keep their own."""
    return f"esi:{namespace}:{component}{suffix}"


# ------------------------------------------------------------------------------------------- Helm charts


class ChartUnavailable(pulumi.RunError):
    """A Helm chart esi is to install cannot be fetched; the message says which, why, and how to go on
    (shown by Pulumi without a traceback)."""

    def __init__(self, chart: HelmChart, reason: str) -> None:
        where = (
            "`make tools` (it copies the chart from the pinned module)"
            if chart.local
            else f"the repository reachable (or set {chart.config_key}.repo to a mirror, {chart.config_key}.version "
            "to a version it has)"
        )
        super().__init__(
            f"cannot install {chart.title}: Helm chart {chart.chart!r} version {chart.version} from {chart.repo} "
            f"is not available: {reason}. Run {where}, or deploy esi without it: `{chart.config_key}.install: false` "
            "in the stack's config, or without the Spark and Flink operators: `pulumi config set "
            "esi:installOperators false` (esi then needs them installed otherwise to run jobs)."
        )
        self.chart = chart


def check_chart_available(chart: HelmChart, timeout: float = 15) -> None:
    """Return if the chart is there at its version — a local chart's ``Chart.yaml``, an http(s) repository's
    index — else raise ``ChartUnavailable``. For OCI registries Helm's own error stands."""
    if chart.local:
        _check_local_chart(chart)
        return
    if not chart.repo.startswith(("https://", "http://")):
        return
    url = chart.repo.rstrip("/") + "/index.yaml"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (the scheme is http(s))
            index = yaml.safe_load(response.read())
    except (OSError, ValueError, http.client.HTTPException, yaml.YAMLError) as err:  # URLError is an OSError
        raise ChartUnavailable(chart, f"its repository index {url} could not be fetched ({err})") from err
    entries = index.get("entries") if isinstance(index, Mapping) else None
    versions = sorted({str(e.get("version")) for e in (entries or {}).get(chart.chart) or () if isinstance(e, Mapping)})
    if chart.version not in versions:
        listed = ", ".join(versions[-8:]) if versions else "none"
        raise ChartUnavailable(chart, f"{url} does not list that version (versions there: {listed})")


def _check_local_chart(chart: HelmChart) -> None:
    manifest = Path(chart.repo) / "Chart.yaml"
    try:
        described = yaml.safe_load(manifest.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ChartUnavailable(chart, f"{manifest} cannot be read ({err})") from err
    found = (described.get("name"), str(described.get("version"))) if isinstance(described, Mapping) else None
    if found != (chart.chart, chart.version):
        raise ChartUnavailable(chart, f"{manifest} describes {found}, not ({chart.chart!r}, {chart.version!r})")


# --------------------------------------------------------------------------------------------- components


def _child(parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on))


class EsiCrds(pulumi.ComponentResource):
    """esi's CustomResourceDefinitions and PriorityClasses: upserted, and left in place by ``pulumi destroy``.

    They are cluster-wide and outlive any one installation: deleting a CRD deletes every object of its kind,
    and pods keep referring to the priority classes. ``pulumi.com/patchForce`` makes this stack the owner of
    their fields even where an earlier ``kubectl apply --server-side`` or another stack set them.
    """

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("esi:cluster:Crds", name, None, opts)
        kept = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        self.crds: list[k8s.apiextensions.v1.CustomResourceDefinition] = []
        for definition in DEFINITIONS:
            manifest = crd(definition)
            self.crds.append(
                k8s.apiextensions.v1.CustomResourceDefinition(
                    f"{name}-{definition.plural}",
                    metadata=_forced(manifest["metadata"]),
                    spec=manifest["spec"],
                    opts=kept,
                )
            )
        self.priority_classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-{manifest['metadata']['name']}",
                metadata=_forced(manifest["metadata"]),
                value=manifest["value"],
                preemption_policy=manifest["preemptionPolicy"],
                global_default=manifest["globalDefault"],
                description=manifest["description"],
                opts=kept,
            )
            for manifest in priority_classes()
        ]
        self.register_outputs({})


def _forced(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {**metadata, "annotations": {**metadata.get("annotations", {}), **PATCH_FORCE}}


class NodeLabels(pulumi.ComponentResource):
    """Labels on existing nodes (server-side apply of just those fields); ``destroy`` takes them off again.

    Not forced: a label some other manager set to a different value is a conflict to look at, not to win.
    """

    def __init__(
        self, name: str, labels: Mapping[str, Mapping[str, str]], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("esi:cluster:NodeLabels", name, None, opts)
        self.patches = [
            k8s.core.v1.NodePatch(
                f"{name}-{node}",
                metadata={"name": node, "labels": dict(values)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for node, values in sorted(labels.items())
        ]
        self.register_outputs({})


class EsiRbac(pulumi.ComponentResource):
    """One component's identity and permissions: its ServiceAccount, and every role it gets bound to it."""

    def __init__(
        self,
        name: str,
        permissions: Permissions,
        namespace: str,
        *,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:cluster:Rbac", name, None, opts)
        component = permissions.component
        child = _child(self, depends_on)
        self.service_account = k8s.core.v1.ServiceAccount(
            name,
            metadata={"name": f"esi-{component}", "namespace": namespace, "labels": _labels(component)},
            opts=child,
        )
        subject = [{"kind": "ServiceAccount", "name": f"esi-{component}", "namespace": namespace}]
        after_account = pulumi.ResourceOptions(parent=self, depends_on=[self.service_account])
        self.resources: list[pulumi.CustomResource] = [self.service_account]
        if permissions.cluster_rules:
            role = k8s.rbac.v1.ClusterRole(
                name,
                metadata={"name": _rbac_name(namespace, component), "labels": _labels(component)},
                rules=[rule.manifest() for rule in permissions.cluster_rules],
                opts=child,
            )
            binding = k8s.rbac.v1.ClusterRoleBinding(
                name,
                metadata={"name": _rbac_name(namespace, component), "labels": _labels(component)},
                role_ref={
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": _rbac_name(namespace, component),
                },
                subjects=subject,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service_account, role]),
            )
            self.resources += [role, binding]
        if permissions.namespace_rules:
            own = k8s.rbac.v1.Role(
                name,
                metadata={"name": f"esi-{component}", "namespace": namespace, "labels": _labels(component)},
                rules=[rule.manifest() for rule in permissions.namespace_rules],
                opts=child,
            )
            own_binding = k8s.rbac.v1.RoleBinding(
                name,
                metadata={"name": f"esi-{component}", "namespace": namespace, "labels": _labels(component)},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"esi-{component}"},
                subjects=subject,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service_account, own]),
            )
            self.resources += [own, own_binding]
        for builtin in permissions.cluster_roles:
            self.resources.append(
                k8s.rbac.v1.ClusterRoleBinding(
                    f"{name}-{builtin}",
                    metadata={"name": _rbac_name(namespace, component, f":{builtin}"), "labels": _labels(component)},
                    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": builtin},
                    subjects=subject,
                    opts=after_account,
                )
            )
        for role_namespace, role_name in permissions.roles:
            self.resources.append(
                k8s.rbac.v1.RoleBinding(
                    f"{name}-{role_namespace}-{role_name}",
                    metadata={
                        "name": _rbac_name(namespace, component, f":{role_name}"),
                        "namespace": role_namespace,
                        "labels": _labels(component),
                    },
                    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
                    subjects=subject,
                    opts=after_account,
                )
            )
        self.register_outputs({})


class EsiOperators(pulumi.ComponentResource):
    """esi's reconcilers as a Deployment."""

    def __init__(
        self,
        name: str,
        args: ClusterEsiArgs,
        *,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:cluster:Operators", name, None, opts)
        manifest = operators_deployment_manifest(args)
        self.deployment = k8s.apps.v1.Deployment(
            name, metadata=manifest["metadata"], spec=manifest["spec"], opts=_child(self, depends_on)
        )
        self.register_outputs({})


class EsiApi(pulumi.ComponentResource):
    """The API and the extender (one Deployment), a Service for each port, and the NetworkPolicy that lets
    only the second scheduler reach the extender port — the extender takes no bearer token."""

    def __init__(
        self,
        name: str,
        args: ClusterEsiArgs,
        *,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:cluster:Api", name, None, opts)
        after = _child(self, depends_on)
        deployment = api_deployment_manifest(args)
        self.deployment = k8s.apps.v1.Deployment(
            name, metadata=deployment["metadata"], spec=deployment["spec"], opts=after
        )
        api = _service("esi-api", args.namespace, API_PORT, "http")
        self.service = k8s.core.v1.Service(name, metadata=api["metadata"], spec=api["spec"], opts=after)
        extender = _service("esi-extender", args.namespace, EXTENDER_PORT, "extender")
        self.extender_service = k8s.core.v1.Service(
            f"{name}-extender", metadata=extender["metadata"], spec=extender["spec"], opts=after
        )
        policy = api_network_policy_manifest(args.namespace)
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            name, metadata=policy["metadata"], spec=policy["spec"], opts=after
        )
        self.address: pulumi.Output[str] = self.service.id.apply(lambda _: f"esi-api.{args.namespace}.svc:{API_PORT}")
        self.register_outputs({"address": self.address})


class SecondSchedulerDeployment(pulumi.ComponentResource):
    """esi-scheduler: the upstream kube-scheduler image with esi's KubeSchedulerConfiguration from a ConfigMap."""

    def __init__(
        self,
        name: str,
        args: ClusterEsiArgs,
        *,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:cluster:SecondScheduler", name, None, opts)
        after = _child(self, depends_on)
        # No metadata.name: Pulumi names it and, as ConfigMaps are replaced when their data changes, a new
        # configuration gets a new name, which changes the pod template and restarts the scheduler.
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"namespace": args.namespace, "labels": _labels("scheduler")},
            data={"config.yaml": yaml.safe_dump(scheduler_config(args), sort_keys=False)},
            opts=after,
        )
        manifest = self.config_map.metadata.apply(lambda m: scheduler_deployment_manifest(args, str(m.name)))
        self.deployment = k8s.apps.v1.Deployment(
            name,
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            opts=after,
        )
        self.register_outputs({})


class ApplicationOperators(pulumi.ComponentResource):
    """The kubeflow Spark operator and the Apache Flink Kubernetes operator, as Helm releases.

    Each chart's repository is checked first (``check``), so an unreachable one stops the update with an
    error that says which chart and how to leave the operators out, before anything is installed.
    """

    def __init__(
        self,
        name: str,
        charts: Sequence[HelmChart],
        *,
        check: Callable[[HelmChart], None] = check_chart_available,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:cluster:ApplicationOperators", name, None, opts)
        charts = [chart for chart in charts if chart.install]
        for chart in charts:
            check(chart)
        # The releases' namespaces are the stack's, so `pulumi destroy` removes them too (Helm's
        # create_namespace would leave them behind).
        namespaces = {
            chart.namespace: k8s.core.v1.Namespace(
                f"{name}-{chart.namespace}",
                metadata={"name": chart.namespace, "labels": dict(PART_OF)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for chart in charts
        }
        self.releases = [
            k8s.helm.v3.Release(
                f"{name}-{chart.release}",
                name=chart.release,
                **_chart_source(chart),
                namespace=chart.namespace,
                values=dict(chart.values),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespaces[chart.namespace]]),
            )
            for chart in charts
        ]
        self.register_outputs({})


def _chart_source(chart: HelmChart) -> dict[str, Any]:
    """Where Helm takes the chart from: a local directory as it is (its Chart.yaml says the version), an OCI
    registry by the chart's reference, a classic repository by name in its index."""
    if chart.local:
        return {"chart": chart.repo}
    if chart.repo.startswith("oci://"):
        return {"chart": f"{chart.repo.rstrip('/')}/{chart.chart}", "version": chart.version}
    return {
        "chart": chart.chart,
        "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        "version": chart.version,
    }


class ClusterEsi(pulumi.ComponentResource):
    """All of esi in an existing cluster (see the module docstring for the tree).

    ``provider`` is the Kubernetes provider everything here goes through (and what later resources of the
    program should use), ``namespace`` esi's namespace, ``api_service`` the API's in-cluster address.
    """

    provider: k8s.Provider
    namespace: pulumi.Output[str]
    api_service: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: ClusterEsiArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        chart_check: Callable[[HelmChart], None] = check_chart_available,
    ) -> None:
        super().__init__("esi:cluster:Esi", name, None, opts)
        self.provider = k8s.Provider(
            f"{name}-cluster",
            kubeconfig=args.kubeconfig,
            context=args.context,
            # Server-side apply: CRDs and PriorityClasses that exist are taken over, node labels are patches.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        inside = pulumi.ResourceOptions(parent=self, provider=self.provider)
        namespace = k8s.core.v1.Namespace(name, metadata={"name": args.namespace, "labels": dict(PART_OF)}, opts=inside)
        crds = EsiCrds(f"{name}-crds", opts=inside)
        NodeLabels(f"{name}-node-labels", args.node_labels, opts=inside)
        rbac = {
            p.component: EsiRbac(f"{name}-{p.component}", p, args.namespace, depends_on=[namespace], opts=inside)
            for p in (OPERATORS, api_permissions(args), SCHEDULER)
        }
        SecondSchedulerDeployment(f"{name}-scheduler", args, depends_on=[namespace, rbac["scheduler"]], opts=inside)
        api = EsiApi(f"{name}-api", args, depends_on=[namespace, rbac["api"], crds], opts=inside)
        before_operators: list[pulumi.Resource] = [namespace, rbac["operators"], crds]
        if args.install_operators:
            # Their charts bring the SparkApplication and FlinkDeployment CRDs the reconcilers watch.
            before_operators.append(
                ApplicationOperators(
                    f"{name}-application-operators",
                    [args.spark_operator, args.flink_operator],
                    check=chart_check,
                    opts=inside,
                )
            )
        EsiOperators(f"{name}-operators", args, depends_on=before_operators, opts=inside)
        self.namespace = namespace.id.apply(lambda _: args.namespace)
        self.api_service = api.address
        self.register_outputs({"namespace": self.namespace, "apiService": self.api_service})
