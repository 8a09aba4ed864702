"""The ``local`` stack: a real control plane with KWOK nodes, and esi running on it as local processes.

``LocalEsi`` is what ``make up`` brings up with ``pulumi up``:

* ``ControlPlane`` — kube-apiserver, etcd, kube-controller-manager and kube-scheduler from the foundation
  library (``infra.local_cluster``), started again by the next ``up`` if it is found stopped (a reboot);
* ``NodePool`` — the KWOK nodes of ``esi:nodes`` (name, cpu, memory, labels), grown, shrunk and relabelled
  as the config changes;
* the CRDs generated from esi's models, the simulated Spark/Flink CRDs and the priority classes, applied
  server-side by the Kubernetes provider;
* ``LocalComponent`` — ``python -m operators``, ``python -m api``, ``python -m sim``, each under
  ``infra.local_cluster.supervise`` (restarted after a crash), logs in the cluster's ``logs/``, created only once its
  health endpoint answers; and the second kube-scheduler ``esi-scheduler`` calling the API's extender, under
  ``infra.local_cluster.supervise`` too;
* with ``esi:realNodes`` above 0, ``RealNodePool`` — kubelets with containerd (``infra.local_cluster.real_node``), the
  Spark and Flink images imported into each — and the namespace ``esi:realNamespace`` (``real``) for jobs on
  them, where the real operators act and the simulator does not: the real Spark operator's controller
  (``python -m infra.stacks.spark_operator``, with its own CRDs) and the Flink stand-in (``python -m flink_standin``).

Processes and the control plane are not Kubernetes objects, so they are Pulumi *dynamic* resources: their
create/update/delete run here, in Python. ``pulumi destroy`` stops every process and deletes the cluster's
directory: nothing is left but the Pulumi state.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from esi.objects.applications import SPARK
from esi.objects.names import SCHEDULER_NAME
from esi.objects.priority import priority_classes
from esi.resources.crds import DEFINITIONS, crd
from infra import images
from infra.images.flink import flink_image, flink_version
from infra.images.spark import spark_image, spark_version
from infra.local_cluster import DEFAULT_WORKDIR, LocalCluster, NodeSpec
from infra.local_cluster.real_node import RealNode, RealNodeSpec, unavailable_reason
from infra.local_cluster.supervise import supervised
from infra.stacks import flink_standin_process, processes, spark_operator
from infra.stacks.cluster import retention, stalled_after
from infra.stacks.second_scheduler import SecondScheduler, SecondSchedulerSettings, scheduler_configuration
from infra.toolchain import REPO_ROOT, commands
from sim.crds import application_crds

__all__ = ["LocalEsi", "LocalEsiArgs", "NodeConfig", "real_images", "real_node_specs"]

READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class NodeConfig:
    name: str
    cpu: str = "4"
    memory: str = "8Gi"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalEsiArgs:
    """The local stack's settings, as plain data (``from_config`` reads them from ``esi:*`` config)."""

    cluster: str = "esi"
    workdir: str = str(DEFAULT_WORKDIR)
    nodes: tuple[NodeConfig, ...] = ()
    namespace: str = "default"
    api_port: int = 8082
    extender_port: int = 8083
    operators_liveness_port: int = 8091
    sim_liveness_port: int = 8092
    sim_args: tuple[str, ...] = ("--time-scale", "0.05", "--runtime-jitter", "0.1")
    allow_anonymous: bool = False
    real_nodes: int = 0
    real_node_cpu: str = "2"  # what each real node offers pods
    real_node_memory: str = "4Gi"
    real_namespace: str = "real"  # the jobs on real nodes: real operators there, the simulator elsewhere
    spark_operator_health_port: int = 8093
    flink_standin_health_port: int = 8094
    stalled_after: float | None = None  # seconds; None: the operators' default
    keep_runs: int | None = None  # Runs kept per namespace; None: the operators' default
    keep_runs_for: float | None = None  # seconds a Run is kept; None: however old

    @classmethod
    def from_config(cls, config: pulumi.Config) -> LocalEsiArgs:
        nodes = tuple(
            NodeConfig(
                name=str(n["name"]),
                cpu=str(n.get("cpu", "4")),
                memory=str(n.get("memory", "8Gi")),
                labels={str(k): str(v) for k, v in (n.get("labels") or {}).items()},
            )
            for n in (config.get_object("nodes") or [])
        )
        workdir = Path(config.get("workdir") or DEFAULT_WORKDIR)
        defaults = cls()
        return cls(
            cluster=config.get("cluster") or defaults.cluster,
            workdir=str(workdir if workdir.is_absolute() else REPO_ROOT / workdir),
            nodes=nodes,
            namespace=config.get("namespace") or defaults.namespace,
            api_port=config.get_int("apiPort") or defaults.api_port,
            extender_port=config.get_int("extenderPort") or defaults.extender_port,
            operators_liveness_port=config.get_int("operatorsLivenessPort") or defaults.operators_liveness_port,
            sim_liveness_port=config.get_int("simLivenessPort") or defaults.sim_liveness_port,
            sim_args=tuple(config.get_object("simArgs") or defaults.sim_args),
            allow_anonymous=config.get_bool("allowAnonymous") or defaults.allow_anonymous,
            real_nodes=config.get_int("realNodes") or defaults.real_nodes,
            real_node_cpu=config.get("realNodeCpu") or defaults.real_node_cpu,
            real_node_memory=config.get("realNodeMemory") or defaults.real_node_memory,
            real_namespace=config.get("realNamespace") or defaults.real_namespace,
            spark_operator_health_port=config.get_int("sparkOperatorHealthPort") or defaults.spark_operator_health_port,
            flink_standin_health_port=config.get_int("flinkStandInHealthPort") or defaults.flink_standin_health_port,
            stalled_after=stalled_after(config),
            **retention(config),
        )


def _cluster(props: dict[str, Any]) -> LocalCluster:
    return LocalCluster(str(props["cluster"]), Path(str(props["workdir"])))


def _changed(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if olds.get(k) != news.get(k)]


# --- the control plane ----------------------------------------------------------------------------------


def _not_whole(cluster: LocalCluster) -> bool:
    """Its control plane is stopped (e.g. after a reboot), or runs without a component that exited."""
    return not cluster.serving() or bool(cluster.exited_components())


def _bring_up(cluster: LocalCluster) -> None:
    """Start a stopped control plane, or the components of a running one that exited."""
    if not cluster.serving():
        cluster.start()
    else:
        cluster.start_exited_components()


class _ControlPlaneProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        cluster = _cluster(props)
        if not cluster.exists():
            cluster.create()
        else:
            _bring_up(cluster)
        return CreateResult(id_=str(cluster.directory), outs={**props, "kubeconfig": str(cluster.kubeconfig)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = _changed(olds, news, ("cluster", "workdir"))
        down = not replaces and _not_whole(_cluster(olds))
        return DiffResult(changes=bool(replaces) or down, replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        cluster = _cluster(news)
        _bring_up(cluster)
        return UpdateResult(outs={**news, "kubeconfig": str(cluster.kubeconfig)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        cluster = _cluster(props)
        cluster.delete()
        for emptied in (cluster.directory.parent, cluster.workdir):  # what kwokctl made around it, if empty now
            with contextlib.suppress(OSError):
                emptied.rmdir()


class ControlPlane(Resource):
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, cluster: str, workdir: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            _ControlPlaneProvider(), name, {"cluster": cluster, "workdir": workdir, "kubeconfig": None}, opts
        )


# --- KWOK nodes -----------------------------------------------------------------------------------------


def _specs(props: dict[str, Any]) -> dict[str, NodeSpec]:
    return {
        str(n["name"]): NodeSpec(str(n["name"]), cpu=str(n["cpu"]), memory=str(n["memory"]), labels=dict(n["labels"]))
        for n in props.get("nodes") or []
    }


class _NodePoolProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        specs = list(_specs(props).values())
        if specs:
            _cluster(props).add_nodes(specs)
        return CreateResult(id_=f"{props['cluster']}-nodes", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(
            changes=_specs(olds) != _specs(news),
            replaces=_changed(olds, news, ("cluster", "workdir")),
            delete_before_replace=True,
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        cluster = _cluster(news)
        before, after = _specs(olds), _specs(news)
        # Capacity is node status, which a re-apply does not change: a resized node is made anew.
        resized = [
            n
            for n in before.keys() & after.keys()
            if (before[n].cpu, before[n].memory) != (after[n].cpu, after[n].memory)
        ]
        gone = [n for n in before if n not in after] + resized
        if gone:
            cluster.kubectl("delete", "node", *gone, "--ignore-not-found")
        changed = [spec for name, spec in after.items() if before.get(name) != spec or name in resized]
        if changed:
            cluster.add_nodes(changed)
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        cluster = _cluster(props)
        names = list(_specs(props))
        if names and cluster.exists():
            cluster.kubectl("delete", "node", *names, "--ignore-not-found")


class NodePool(Resource):
    def __init__(
        self, name: str, cluster: str, workdir: str, nodes: tuple[NodeConfig, ...], opts: pulumi.ResourceOptions
    ) -> None:
        listed = [{"name": n.name, "cpu": n.cpu, "memory": n.memory, "labels": n.labels} for n in nodes]
        super().__init__(_NodePoolProvider(), name, {"cluster": cluster, "workdir": workdir, "nodes": listed}, opts)


# --- real nodes -----------------------------------------------------------------------------------------

REAL_NODE_LABEL = "esi.local/real-slots"  # =<i>: the `real` Testbed's slots (manifests/testbeds.yaml)
REAL_NODE_ROLE_LABEL = "esi.local/real-node"  # ="true" on every real node: where JobManagers and drivers go


def real_node_specs(count: int, cpu: str = "2", memory: str = "4Gi") -> tuple[RealNodeSpec, ...]:
    """``count`` real nodes, ``esi-real-<i>``, each offering ``cpu`` and ``memory``, labelled
    ``esi.local/real-slots=<i>`` (a Testbed's label) and ``esi.local/real-node=true``."""
    return tuple(
        RealNodeSpec(
            f"esi-real-{i}", cpu=cpu, memory=memory, labels={REAL_NODE_LABEL: str(i), REAL_NODE_ROLE_LABEL: "true"}
        )
        for i in range(count)
    )


def real_images() -> dict[str, tuple[images.BuiltImage, str]]:
    """The images every real node holds (built if missing), by framework, each with the name manifests use for
    it, ``esi.local/<framework>:<version>`` (the image's own tag adds a digest of its contents)."""
    return {
        "spark": (spark_image(), f"{images.REGISTRY}/spark:{spark_version()}"),
        "flink": (flink_image(), f"{images.REGISTRY}/flink:{flink_version()}"),
    }


def real_nodes_refused(count: int) -> str | None:
    """Why ``count`` real nodes and their operators cannot run on this machine, or None."""
    if count <= 0:
        return None
    reason = unavailable_reason() or spark_operator.unavailable_reason() or flink_standin_process.unavailable_reason()
    return f"esi:realNodes is {count}, but {reason}; set esi:realNodes: 0 to go without" if reason else None


def _real_specs(props: dict[str, Any]) -> dict[str, RealNodeSpec]:
    if "nodes" not in props:  # state written before nodes were listed: `count` nodes of 1 cpu / 2Gi
        return {spec.name: spec for spec in real_node_specs(int(props.get("count") or 0), "1", "2Gi")}
    return {
        str(n["name"]): RealNodeSpec(
            str(n["name"]), cpu=str(n["cpu"]), memory=str(n["memory"]), labels=dict(n["labels"])
        )
        for n in props.get("nodes") or []
    }


def _images(props: dict[str, Any]) -> list[tuple[images.BuiltImage, str]]:
    return [
        (images.BuiltImage(str(i["reference"]), Path(str(i["archive"]))), str(i["alias"]))
        for i in props.get("images") or []
    ]


class _RealNodePoolProvider(ResourceProvider):
    """Real nodes (``infra.local_cluster.real_node``) holding the images: started with the stack, deleted with it,
    started again if stopped, made anew when their size or labels change."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._start(props, _real_specs(props).values())
        return CreateResult(id_=f"{props['cluster']}-real-nodes", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        cluster = _cluster(olds)
        stopped = any(not RealNode(cluster, spec).running() for spec in _real_specs(olds).values())
        return DiffResult(
            changes=_real_specs(olds) != _real_specs(news) or _images(olds) != _images(news) or stopped,
            replaces=_changed(olds, news, ("cluster", "workdir")),
            delete_before_replace=True,
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        cluster = _cluster(news)
        before, after = _real_specs(olds), _real_specs(news)
        for name, spec in before.items():
            if after.get(name) != spec:  # gone, or to be made anew with its new size or labels
                RealNode(cluster, spec).delete()
        self._start(news, after.values())
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        cluster = _cluster(props)
        if cluster.exists():
            for spec in _real_specs(props).values():
                RealNode(cluster, spec).delete()

    @staticmethod
    def _start(props: dict[str, Any], specs: Iterable[RealNodeSpec]) -> None:
        specs = list(specs)
        if refused := real_nodes_refused(len(specs)):
            raise RuntimeError(refused)
        cluster = _cluster(props)
        for spec in specs:
            node = RealNode(cluster, spec)
            node.start()  # a running node is left as it is
            for image, alias in _images(props):
                images.import_image(image, node.containerd_socket)
                images.alias_image(image, alias, node.containerd_socket)


class RealNodePool(Resource):
    def __init__(
        self,
        name: str,
        cluster: str,
        workdir: str,
        *,
        specs: tuple[RealNodeSpec, ...],
        held: list[tuple[images.BuiltImage, str]],
        opts: pulumi.ResourceOptions,
    ) -> None:
        # `nodes` as NodePool lists them: the policy pack checks Testbeds against them.
        listed = [{"name": n.name, "cpu": n.cpu, "memory": n.memory, "labels": dict(n.labels)} for n in specs]
        pictures = [{"reference": i.reference, "archive": str(i.archive), "alias": alias} for i, alias in held]
        props = {"cluster": cluster, "workdir": workdir, "nodes": listed, "images": pictures}
        super().__init__(_RealNodePoolProvider(), name, props, opts)


def job_accounts(namespace: str) -> list[dict[str, Any]]:
    """The accounts jobs' drivers and JobManagers run as, as the examples give them, in ``namespace``."""
    examples = REPO_ROOT / "examples" / "manifests" / "serviceaccount.yaml"
    documents = [d for d in yaml.safe_load_all(examples.read_text()) if isinstance(d, dict)]
    return [{**d, "metadata": {**d["metadata"], "namespace": namespace}} for d in documents]


# --- esi's processes ------------------------------------------------------------------------------------


def _wait_ready(cluster: LocalCluster, name: str, url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if commands.answers(url):
            return
        log = cluster.logs_dir / f"{name}.log"
        if not cluster.process_running(name) or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            raise RuntimeError(f"{name} did not become ready at {url} within {READY_TIMEOUT:.0f}s; {log}:\n{tail}")
        time.sleep(0.2)


class _ComponentProvider(ResourceProvider):
    """One supervised process; ``outs`` adds what it wrote that others need (the API's token)."""

    def _start(self, props: dict[str, Any]) -> dict[str, Any]:
        cluster = _cluster(props)
        name = str(props["name"])
        if cluster.process_running(name):
            cluster.stop_process(name)
        cluster.start_process(name, supervised(name, [str(arg) for arg in props["argv"]]))
        _wait_ready(cluster, name, str(props["ready"]))
        token_file = props.get("tokenFile")
        token = Path(str(token_file)).read_text().strip() if token_file else None
        return {**props, "token": token}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['cluster']}/{props['name']}", outs=self._start(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = _changed(olds, news, ("argv", "ready", "tokenFile"))
        stopped = not _cluster(olds).process_running(str(olds["name"]))
        return DiffResult(
            changes=bool(changed) or stopped,
            replaces=_changed(olds, news, ("cluster", "workdir", "name")),
            delete_before_replace=True,
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._start(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        cluster = _cluster(props)
        if cluster.directory.exists():
            cluster.stop_process(str(props["name"]))


class LocalComponent(Resource):
    token: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        *,
        cluster: str,
        workdir: str,
        argv: Sequence[pulumi.Input[str]],
        ready: str,
        token_file: str | None = None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            "cluster": cluster,
            "workdir": workdir,
            "name": name,
            "argv": argv,
            "ready": ready,
            "tokenFile": token_file,
            "token": None,
        }
        super().__init__(_ComponentProvider(), name, props, opts)


class _SchedulerProvider(ResourceProvider):
    """The second kube-scheduler (``infra.stacks.second_scheduler``), configured to call the extender."""

    def _scheduler(self, props: dict[str, Any]) -> SecondScheduler:
        return SecondScheduler(_cluster(props), SecondSchedulerSettings(SCHEDULER_NAME, str(props["extenderUrl"])))

    def create(self, props: dict[str, Any]) -> CreateResult:
        scheduler = self._scheduler(props)
        if scheduler.running():
            scheduler.stop()
        scheduler.start(supervise=True)
        return CreateResult(id_=f"{props['cluster']}/{SCHEDULER_NAME}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        stopped = not self._scheduler(olds).running()
        return DiffResult(
            changes=bool(_changed(olds, news, ("extenderUrl", "configuration"))) or stopped,
            replaces=_changed(olds, news, ("cluster", "workdir")),
            delete_before_replace=True,
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self.create(news)
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if _cluster(props).directory.exists():
            self._scheduler(props).stop()


class SecondSchedulerProcess(Resource):
    def __init__(self, name: str, cluster: str, workdir: str, extender_url: str, opts: pulumi.ResourceOptions) -> None:
        # The configuration it will run with, as an input: what the policy pack checks (100% of nodes scored).
        local = LocalCluster(cluster, Path(workdir))
        configuration = scheduler_configuration(
            SecondSchedulerSettings(SCHEDULER_NAME, extender_url), str(local.kubeconfig)
        )
        props = {"cluster": cluster, "workdir": workdir, "extenderUrl": extender_url, "configuration": configuration}
        super().__init__(_SchedulerProvider(), name, props, opts)


def _real_operators(args: LocalEsiArgs, after: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The real Spark operator's controller and the Flink stand-in, for the namespace of jobs on real nodes."""
    common = {"cluster": args.cluster, "workdir": args.workdir}
    spark_health = f"http://127.0.0.1:{args.spark_operator_health_port}/readyz"
    spark = LocalComponent(
        "esi-spark-operator",
        argv=[
            sys.executable,
            "-m",
            "infra.stacks.spark_operator",
            "controller",
            f"--cluster={args.cluster}",
            f"--workdir={args.workdir}",
            f"--namespace={args.real_namespace}",
            f"--health-port={args.spark_operator_health_port}",
        ],
        ready=spark_health,
        opts=after,
        **common,
    )
    flink_health = processes.FLINK_STANDIN.live_url(args.flink_standin_health_port)
    local = LocalCluster(args.cluster, Path(args.workdir))
    flink = LocalComponent(
        processes.FLINK_STANDIN.name,
        argv=flink_standin_process.standin_argv(local, [args.real_namespace], health=flink_health),
        ready=flink_health,
        opts=after,
        **common,
    )
    return [spark, flink]


# --- the whole local esi --------------------------------------------------------------------------------


def _deleted_with(owner: pulumi.Resource) -> pulumi.ResourceTransform:
    """A transform giving a component's resources (a ConfigGroup's objects too) ``deleted_with=owner``."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        return pulumi.ResourceTransformResult(
            args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(deleted_with=owner))
        )

    return transform


class LocalEsi(pulumi.ComponentResource):
    """The local control plane, its nodes, esi's cluster-wide objects and esi's processes."""

    def __init__(self, name: str, args: LocalEsiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("esi:local:Esi", name, None, opts)
        mine = pulumi.ResourceOptions(parent=self)
        control_plane = ControlPlane(f"{name}-control-plane", args.cluster, args.workdir, mine)
        self.kubeconfig: pulumi.Output[str] = control_plane.kubeconfig
        self.provider = k8s.Provider(
            f"{name}-cluster", kubeconfig=control_plane.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )
        on_cluster = pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[control_plane])
        after_plane = pulumi.ResourceOptions(parent=self, depends_on=[control_plane])
        nodes = NodePool(f"{name}-nodes", args.cluster, args.workdir, args.nodes, after_plane)
        if refused := real_nodes_refused(args.real_nodes):
            raise RuntimeError(refused)
        real = args.real_nodes > 0
        if real:  # shown while the program runs; the first build takes minutes, later ones are cached
            pulumi.log.info("the Spark and Flink images for the real nodes: built if missing (cached)")
        held = real_images() if real else {}
        real_nodes = RealNodePool(
            f"{name}-real-nodes",
            args.cluster,
            args.workdir,
            specs=real_node_specs(args.real_nodes, args.real_node_cpu, args.real_node_memory),
            held=list(held.values()),
            opts=after_plane,
        )
        # With real nodes, the real Spark operator's CRDs: it watches every kind they define.
        applications = application_crds()
        if real:
            applications = [c for c in applications if c["spec"]["names"]["kind"] != SPARK.kind]
            applications += spark_operator.crd_manifests()
        # Deleted with the control plane, not before it: deleting a CRD waits for the finalizers of its
        # objects, and those made outside the stack (kubectl, a scheduler's Schedulings) keep theirs once
        # the operators are gone — `pulumi destroy` would hang. So is the namespace of jobs on real nodes.
        with_the_plane = pulumi.ResourceOptions.merge(
            on_cluster, pulumi.ResourceOptions(transforms=[_deleted_with(control_plane)])
        )
        definitions = k8s.yaml.v2.ConfigGroup(
            f"{name}-definitions",
            objs=[crd(d) for d in DEFINITIONS] + applications + priority_classes(),
            opts=with_the_plane,
        )
        # Made also without real nodes: committed manifests may name it (their Testbed then has no nodes).
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.real_namespace}}
        real_namespace = k8s.yaml.v2.ConfigGroup(
            f"{name}-real-namespace", objs=[namespace, *job_accounts(args.real_namespace)], opts=with_the_plane
        )
        prerequisites: list[pulumi.Resource] = [definitions, nodes, real_nodes, real_namespace]
        cluster_dir = LocalCluster(args.cluster, Path(args.workdir)).directory
        kubeconfig = cluster_dir / "kubeconfig.yaml"
        after = pulumi.ResourceOptions(parent=self, depends_on=prerequisites)
        common = {"cluster": args.cluster, "workdir": args.workdir}
        operators_health = processes.OPERATORS.live_url(args.operators_liveness_port)
        operators = LocalComponent(
            processes.OPERATORS.name,
            argv=processes.operators_command(
                sys.executable,
                kubeconfig=kubeconfig,
                liveness=operators_health,
                stalled_after=args.stalled_after,
                keep_runs=args.keep_runs,
                keep_runs_for=args.keep_runs_for,
            ),
            ready=operators_health,
            opts=after,
            **common,
        )
        token_file = cluster_dir / "api-token"
        api = LocalComponent(
            processes.API.name,
            argv=processes.api_command(
                sys.executable,
                kubeconfig=kubeconfig,
                port=args.api_port,
                extender_port=args.extender_port,
                token_file=token_file,
                namespace=args.namespace,
                allow_anonymous=args.allow_anonymous,
            ),
            ready=processes.API.ready_url(args.api_port),
            token_file=str(token_file),
            opts=after,
            **common,
        )
        sim_health = processes.SIM.live_url(args.sim_liveness_port)
        elsewhere = [f"--namespace=!{args.real_namespace}"] if real else []  # a kopf pattern: all namespaces but
        sim = LocalComponent(
            processes.SIM.name,
            argv=processes.sim_command(
                sys.executable, kubeconfig=kubeconfig, liveness=sim_health, more=[*elsewhere, *args.sim_args]
            ),
            ready=sim_health,
            opts=after,
            **common,
        )
        self.processes: list[pulumi.Resource] = [operators, api, sim]
        if real:
            self.processes += _real_operators(args, after)
        scheduler = SecondSchedulerProcess(
            f"{name}-scheduler",
            extender_url=processes.extender_url("127.0.0.1", args.extender_port),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[api]),
            **common,
        )
        self.processes.append(scheduler)
        self.real_namespace = pulumi.Output.from_input(args.real_namespace if real else None)
        self.spark_image = pulumi.Output.from_input(held["spark"][1] if real else None)
        self.flink_image = pulumi.Output.from_input(held["flink"][1] if real else None)
        self.api_url = pulumi.Output.from_input(f"http://127.0.0.1:{args.api_port}")
        self.api_token: pulumi.Output[str | None] = api.token
        self.docs_url = pulumi.Output.from_input(f"http://127.0.0.1:{args.api_port}/docs")
        self.ui_url = pulumi.Output.from_input(f"http://127.0.0.1:{args.api_port}/ui/")
        outputs = {
            "kubeconfig": self.kubeconfig,
            "apiUrl": self.api_url,
            "docsUrl": self.docs_url,
            "uiUrl": self.ui_url,
            "realNamespace": self.real_namespace,
            "sparkImage": self.spark_image,
            "flinkImage": self.flink_image,
        }
        self.register_outputs(outputs)
